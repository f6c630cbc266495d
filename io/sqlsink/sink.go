package sqlsink

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// Sink is a WriteToSql sink. It implements contract.Sink and
// contract.TransactionalSink; the package documentation describes the
// lifecycle. Its methods are safe for concurrent use.
//
// Lock order: Sink.mu, then workerBuf.mu; dbMu is never acquired while
// holding either of them.
type Sink struct {
	cfg    Config
	schema *row.Schema
	l      *layout
	// buffered is about how many bytes the workers' buffers hold
	// (BufferedBytes): bufferedValueBytes a value.
	buffered atomic.Int64
	// progressID is the sink's key in the progress table: Config.SinkID,
	// plus "@g<generation>" in façade mode.
	progressID string

	// dbMu serialises database work.
	dbMu sync.Mutex
	db   struct {
		be       backend
		opened   bool
		prepared bool
		closed   bool
		// l is the layout of the table the backend writes: s.l, or in
		// façade mode that of the generation's physical table.
		l *layout
		// facade says the sink writes a façade generation's table.
		facade bool
		// staged says the sink writes staging table number staging of a
		// staged layout.
		staged  bool
		staging int64
		// unregistered says the staging table is not (yet) a member of
		// the view: this generation creates it at its setup. Until then
		// a table of its name is another generation's, being set up
		// (resolveStagedLocked).
		unregistered bool
		// rekey says the staged sink's setup re-keys the members written
		// before (Config.Rekey), undoRekey the re-key it undoes
		// (Config.UndoRekey); both set by resolveStagedLocked.
		rekey     bool
		undoRekey *stagedRekey
	}

	mu struct {
		sync.Mutex
		workers []*workerBuf
		// maxEpoch is the newest epoch PreCommit or Commit saw; sawEpoch
		// says there was one (the run takes checkpoints).
		maxEpoch uint64
		sawEpoch bool
		// pending are the parts PreCommit handed out that no Commit has
		// covered yet; Close applies them if their checkpoint never
		// completed.
		pending []pendingPart
		closed  bool
		// aborted says the execution stopped short (Abort): a partition
		// run's staged rows are not published.
		aborted bool
		// lastMerge is when a staged sink last merged (or first
		// committed).
		lastMerge time.Time
	}
}

type pendingPart struct {
	epoch  uint64
	worker int
	data   []byte
}

// workerBuf holds what one worker wrote since its last PreCommit.
type workerBuf struct {
	mu   sync.Mutex
	vals []any
	// seen counts default element IDs since the last PreCommit, to tell
	// identical rows apart (append mode).
	seen map[string]int
}

// New returns a sink for rows of schema s. It validates the configuration
// against the schema and does no I/O: call Prepare (or Validate) at submit
// time.
func New(cfg Config, s *row.Schema) (*Sink, error) {
	cfg.Key = slices.Clone(cfg.Key)
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l, err := newLayout(&cfg, s)
	if err != nil {
		return nil, err
	}
	sk := &Sink{cfg: cfg, schema: s, l: l, progressID: cfg.SinkID}
	sk.db.l = l
	if cfg.Facade {
		sk.db.l, sk.db.facade = l.physical(cfg.Generation), true
		sk.progressID = cfg.SinkID + "@g" + strconv.FormatInt(cfg.Generation, 10)
	}
	switch cfg.Driver {
	case DriverSQLite:
		sk.db.be = newSQLite(&sk.cfg, sk.db.l)
	default:
		sk.db.be = newPostgres(&sk.cfg, sk.db.l)
	}
	return sk, nil
}

// Config returns the sink's configuration, with defaults filled in.
func (s *Sink) Config() Config { return s.cfg }

// Columns returns the table's column names in order, as the sink creates
// them.
func (s *Sink) Columns() []string {
	out := make([]string, len(s.l.cols))
	for i, c := range s.l.cols {
		out[i] = c.name
	}
	return out
}

// Prepare connects, creates the table (and its unique key index and the
// progress table) or checks the existing one, and prepares the statements.
// It returns ErrColumnType or ErrTableShape errors naming the table and
// column when the existing table cannot take the rows. Call it at submit
// time, before any data flows; it is idempotent.
func (s *Sink) Prepare(ctx context.Context) error {
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	return s.prepareLocked(ctx, true)
}

// Validate performs Prepare's checks without changing the database (it
// still connects, which creates an empty SQLite file). A table that does not
// exist yet is valid. It disconnects before it returns: a sink loaded
// only to be checked (a validate-only request, weir check, a refused
// update) is never closed, and each one kept a connection (for SQLite a
// file and a goroutine) for the server's lifetime. A run connects again
// at its first commit.
func (s *Sink) Validate(ctx context.Context) error {
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if s.db.prepared {
		return nil
	}
	err := s.prepareLocked(ctx, false)
	if s.db.opened && !s.db.closed {
		// A read-only connection: an error closing it loses nothing,
		// and the connection is gone either way.
		_ = s.db.be.close(context.WithoutCancel(ctx))
		s.db.opened = false
	}
	return err
}

func (s *Sink) prepareLocked(ctx context.Context, create bool) error {
	if s.db.closed {
		return ErrClosed
	}
	if s.db.prepared {
		return nil
	}
	be := s.db.be
	if !s.db.opened {
		if err := be.open(ctx); err != nil {
			return fmt.Errorf("table %s: connecting to %s: %w", s.l.table, s.cfg.Driver, err)
		}
		s.db.opened = true
	}
	if s.cfg.Layout == LayoutStaged {
		s.db.staged = true
		if err := s.resolveStagedLocked(ctx, create); err != nil {
			return fmt.Errorf("table %s: %w", s.l.table, err)
		}
	}
	if !s.db.facade && !s.db.staged {
		// A plain table that has become a façade view (a parallel
		// replacement migrated it): write this generation's table.
		joined, err := s.viewIsFacadeLocked(ctx)
		if err != nil {
			return fmt.Errorf("table %s: %w", s.l.table, err)
		}
		if joined {
			s.joinFacadeLocked()
		}
	}
	if s.cfg.RekeyedUpstream != "" && s.cfg.Rekey == nil {
		if err := s.refuseIndirectRekeyLocked(ctx); err != nil {
			return fmt.Errorf("table %s: %w", s.l.table, err)
		}
	}
	if s.cfg.Rekey != nil && !s.db.staged {
		if err := s.refuseTableRekeyLocked(ctx); err != nil {
			return fmt.Errorf("table %s: %w", s.l.table, err)
		}
	}
	if s.db.facade {
		// Refuse what cannot be a façade before creating anything.
		if err := s.checkFacadeLocked(ctx); err != nil {
			return fmt.Errorf("table %s: %w", s.l.table, err)
		}
	}
	l := s.db.l
	var existing map[string]string
	if !s.db.staged || create || !s.db.unregistered {
		// A validation does not read a staging table this generation has
		// not registered: the members it is checked against are
		// (resolveStagedLocked); a table of that name is another
		// generation's whose setup is under way (the job before this
		// one sets its sink up at its first commit), which this one's
		// setup will see registered and write after.
		var err error
		if existing, err = be.describe(ctx); err != nil {
			return fmt.Errorf("reading the columns of table %s: %w", l.table, err)
		}
	}
	ddl, err := s.renameColumns(existing)
	if err != nil {
		return err
	}
	if existing == nil {
		ddl = append(ddl, createTableSQL(l, be))
		existing = map[string]string{}
		for _, c := range l.cols {
			existing[be.norm(c.name)] = be.sqlType(c.kind)
		}
	} else {
		var errs []error
		var missing []string
		var added []column
		before := maps.Clone(existing)
		for _, c := range l.cols {
			decl, ok := existing[be.norm(c.name)]
			switch {
			case !ok && (c.role == roleField && !c.key || c.role == rolePaneCutShort):
				// A new value column, or pane_cut_short on a table made
				// before it existed (its rows count as complete).
				ddl = append(ddl, "ALTER TABLE "+quoteTable(l.table)+" ADD COLUMN "+columnDef(c, be))
				existing[be.norm(c.name)] = be.sqlType(c.kind)
				if c.role == roleField {
					added = append(added, c)
				}
			case !ok:
				missing = append(missing, c.name)
			case !be.compatible(c.kind, decl) && s.db.staged && !widensToFloat(be, c, decl):
				errs = append(errs, fmt.Errorf("%w: %w: table %s, column %s: the table has type %s, the sink writes %s (%s); "+
					"a staged table keeps one type per column, except an int widened to float: keep the type, or write to a new table",
					ErrSchemaChange, ErrColumnType, l.table, c.name, decl, be.sqlType(c.kind), s.columnPurpose(c)))
			case !be.compatible(c.kind, decl) && c.kind == kInt && c.role == roleField && !c.key && !s.db.facade && be.compatible(kFloat, decl):
				// A float column whose field narrowed to int (a Combine
				// output declared allow_lossy, compat's
				// COMBINE_OUTPUT_NARROWED): the column stays, and holds
				// the ints exactly (to 2^53); the rows before keep their
				// floats.
			case !be.compatible(c.kind, decl) && c.kind == kFloat && c.role == roleField && !c.key && !s.db.facade:
				// An int column whose field widened to float (compat's
				// COMBINE_OUTPUT_WIDENED) is widened in place.
				stmt, ok := be.widenFloat(l.table, c.name, decl)
				if !ok {
					errs = append(errs, fmt.Errorf("%w: table %s, column %s: the table has type %s, the sink writes %s (%s)",
						ErrColumnType, l.table, c.name, decl, be.sqlType(c.kind), s.columnPurpose(c)))
					break
				}
				if stmt != "" {
					ddl = append(ddl, stmt)
					existing[be.norm(c.name)] = be.sqlType(kFloat)
				}
			case !be.compatible(c.kind, decl):
				errs = append(errs, fmt.Errorf("%w: table %s, column %s: the table has type %s, the sink writes %s (%s)",
					ErrColumnType, l.table, c.name, decl, be.sqlType(c.kind), s.columnPurpose(c)))
			}
		}
		if err := s.checkRenames(before, added); err != nil {
			errs = append(errs, err)
		}
		if len(missing) > 0 {
			errs = append(errs, fmt.Errorf("%w: table %s has no column %s, which the sink needs to key or version its rows; "+
				"write to a new table (the sink creates it)", ErrTableShape, l.table, strings.Join(missing, ", ")))
		}
		idx, err := be.indexes(ctx)
		if err != nil {
			return fmt.Errorf("reading the indexes of table %s: %w", l.table, err)
		}
		prefix := strings.ToLower(keyIndexPrefix(l.table))
		for _, name := range idx {
			if strings.HasPrefix(strings.ToLower(name), prefix) && !strings.EqualFold(name, l.indexName()) {
				errs = append(errs, fmt.Errorf("%w: table %s already has the unique index %s of a sink with another key or mode; "+
					"this sink keys rows by (%s): write to a new table, or drop that index", ErrTableShape, l.table, name, l.keyNames()))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	if !create {
		return nil
	}
	ddl = append(ddl, createIndexSQL(l, be), progressDDL)
	if err := be.exec(ctx, ddl...); err != nil {
		return fmt.Errorf("creating table %s: %w", l.table, err)
	}
	if s.db.facade {
		if err := s.setupFacadeLocked(ctx); err != nil {
			return fmt.Errorf("table %s: setting up the façade view: %w", s.l.table, err)
		}
	}
	if s.db.staged {
		if err := s.setupStagedLocked(ctx); err != nil {
			return fmt.Errorf("table %s: setting up the staged layout: %w", s.l.table, err)
		}
	}
	if err := be.ready(ctx, existing); err != nil {
		return fmt.Errorf("preparing writes to table %s: %w", l.table, err)
	}
	s.db.prepared = true
	return nil
}

// columnPurpose says what a column holds, for messages.
func (s *Sink) columnPurpose(c column) string {
	switch c.role {
	case roleField:
		what := "field " + c.name + " of type " + s.schema.Fields[c.field].Type.String()
		if c.key {
			what = "key " + what
		}
		return what
	case roleWindowStart, roleWindowEnd:
		return "window bound of the upsert key"
	case roleElementID:
		return "identity of appended rows"
	case rolePaneIndex, rolePaneTiming, rolePaneFirst, rolePaneLast, rolePaneCutShort:
		return "pane of the windowed result"
	}
	return "revision of upserted rows"
}

func (s *Sink) worker(w int) (*workerBuf, error) {
	if w < 0 {
		return nil, fmt.Errorf("table %s: worker %d is negative", s.l.table, w)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, ErrClosed
	}
	for len(s.mu.workers) <= w {
		s.mu.workers = append(s.mu.workers, &workerBuf{})
	}
	return s.mu.workers[w], nil
}

// Write converts the rows of elems and buffers them for worker. Each
// element's Value must be a *row.Row of the sink's schema. It does no I/O
// unless Config.FlushEvery is set. An element that cannot be written (a
// wrong type, a null key) fails the call with an error naming the table and
// column; the bundle's earlier rows stay buffered.
func (s *Sink) Write(ctx context.Context, worker int, elems []contract.Element) error {
	_, err := s.write(ctx, worker, elems, nil, false)
	return err
}

// WriteRejecting is Write, except that an element whose row the table
// cannot store (a null in a key or pane column: reason ReasonNullKey; a
// value of the wrong type: ReasonWrongType; a value its column cannot hold:
// ReasonValueOutOfRange) is left out and appended to rejects instead of
// failing the call (contract.RejectingSink).
func (s *Sink) WriteRejecting(ctx context.Context, worker int, elems []contract.Element, rejects []contract.SinkReject) ([]contract.SinkReject, error) {
	return s.write(ctx, worker, elems, rejects, true)
}

func (s *Sink) write(ctx context.Context, worker int, elems []contract.Element, rejects []contract.SinkReject, reject bool) ([]contract.SinkReject, error) {
	wb, err := s.worker(worker)
	if err != nil {
		return rejects, err
	}
	wb.mu.Lock()
	var flush []any
	held := len(wb.vals)
	rejects, err = s.bufferLocked(wb, elems, rejects, reject)
	if s.cfg.FlushEvery > 0 && len(wb.vals) >= s.cfg.FlushEvery*s.l.nrec {
		flush = wb.vals
		wb.vals, wb.seen = nil, nil
	}
	s.buffered.Add(int64(len(wb.vals)-held) * bufferedValueBytes)
	wb.mu.Unlock()
	if flush != nil {
		if ferr := s.apply(ctx, []part{{generation: s.cfg.Generation, jobID: s.cfg.JobID, vals: flush}}, 0, false); ferr != nil {
			return rejects, errors.Join(err, ferr)
		}
	}
	return rejects, err
}

// bufferLocked converts and buffers elems. With reject set, an element
// whose row the table cannot store is appended to rejects and skipped;
// otherwise it fails the call.
func (s *Sink) bufferLocked(wb *workerBuf, elems []contract.Element, rejects []contract.SinkReject, reject bool) ([]contract.SinkReject, error) {
	l := s.l
	for i := range elems {
		e := &elems[i]
		if s.cfg.Owns != nil && !s.cfg.Owns(e.Window) {
			continue
		}
		r, ok := e.Value.(*row.Row)
		if !ok || r == nil {
			return rejects, fmt.Errorf("table %s: WriteToSql writes rows, got %s", l.table, row.GoTypeName(e.Value))
		}
		if r.Schema != s.schema && (r.Schema == nil || !r.Schema.Equal(s.schema)) {
			return rejects, fmt.Errorf("table %s: a row of schema %s reached a sink built for %s", l.table, r.Schema, s.schema)
		}
		if len(r.Values) != len(s.schema.Fields) {
			return rejects, fmt.Errorf("table %s: a row has %d values for the %d fields of its schema", l.table, len(r.Values), len(s.schema.Fields))
		}
		start := len(wb.vals)
		var err error
		wb.vals, err = l.appendRecord(wb.vals, e, r)
		if err == nil && !l.upsert {
			err = s.elementID(wb, e, r)
		}
		if err != nil {
			clear(wb.vals[start:])
			wb.vals = wb.vals[:start]
			var ve *valueError
			if reject && errors.As(err, &ve) {
				rejects = append(rejects, contract.SinkReject{Index: i, Err: contract.ElementError{Reason: ve.reason, Message: err.Error()}})
				continue
			}
			return rejects, err
		}
	}
	return rejects, nil
}

// elementID fills the element_id of the record just appended.
func (s *Sink) elementID(wb *workerBuf, e *contract.Element, r *row.Row) error {
	var id string
	var err error
	if s.cfg.ElementID != nil {
		id, err = s.cfg.ElementID(e, r)
	} else {
		id, err = DefaultElementID(e, r)
		if err == nil {
			if wb.seen == nil {
				wb.seen = map[string]int{}
			}
			n := wb.seen[id] + 1
			wb.seen[id] = n
			if n > 1 {
				id += "#" + strconv.Itoa(n)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("table %s: element identity: %w", s.l.table, err)
	}
	if id == "" {
		return fmt.Errorf("table %s: element identity is empty", s.l.table)
	}
	wb.vals[len(wb.vals)-1] = id
	return nil
}

// bufferedValueBytes is what BufferedBytes counts for a buffered value:
// its interface and a typical payload (a number, a short string).
const bufferedValueBytes = 32

// BufferedBytes returns about how many bytes of rows the workers wrote
// that no PreCommit took yet (contract.BufferingSink): the sink holds them
// in memory until then.
func (s *Sink) BufferedBytes() int64 { return s.buffered.Load() }

// PreCommit returns, encoded, the rows worker buffered since its previous
// PreCommit, and forgets them: the runner stores the part in the checkpoint
// of epoch and hands it back to Commit. It does no I/O.
//
// If the worker's part of an earlier epoch has not been committed (its
// Commit failed, or its checkpoint never completed), its rows are carried
// into this part too: a checkpoint's parts always hold every row the sink
// has not committed, so a Commit of a later epoch (which records that
// epoch as done and lets the sources acknowledge) or a restart from the
// later checkpoint never leaves them out. Rows are idempotent, so a row
// applied twice is harmless.
func (s *Sink) PreCommit(_ context.Context, worker int, epoch uint64) ([]byte, error) {
	wb, err := s.worker(worker)
	if err != nil {
		return nil, err
	}
	s.noteEpoch(epoch)
	wb.mu.Lock()
	defer wb.mu.Unlock()
	wb.seen = nil
	// The newest uncommitted part of the worker already carries the older
	// ones. A part of this same epoch counts too: a worker whose input
	// ended while a checkpoint was in flight pre-commits its final share
	// for that checkpoint's epoch after its barrier part, and the
	// checkpoint may commit either, so both must hold the rows (a second,
	// empty part lost them: its commit succeeded and dropped the pending
	// part). Rows committed twice are written once (upsert by revision,
	// append by element ID).
	var carry []byte
	s.mu.Lock()
	for _, pp := range s.mu.pending {
		if pp.worker == worker && pp.epoch <= epoch {
			carry = pp.data
		}
	}
	s.mu.Unlock()
	vals := wb.vals
	if carry != nil {
		p, err := s.l.decodePart(carry)
		if err != nil {
			return nil, err
		}
		vals = append(p.vals, wb.vals...)
	}
	if len(vals) == 0 {
		return nil, nil
	}
	b := s.l.encodePart(s.cfg.Generation, s.cfg.JobID, vals)
	s.buffered.Add(-int64(len(wb.vals)) * bufferedValueBytes)
	clear(wb.vals)
	wb.vals = wb.vals[:0]
	s.mu.Lock()
	s.mu.pending = append(s.mu.pending, pendingPart{epoch: epoch, worker: worker, data: b})
	s.mu.Unlock()
	return b, nil
}

func (s *Sink) noteEpoch(epoch uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.sawEpoch || epoch > s.mu.maxEpoch {
		s.mu.maxEpoch = epoch
	}
	s.mu.sawEpoch = true
}

// Commit applies the parts of epoch (from PreCommit, possibly of an earlier
// process) in one transaction, with the progress record of the epoch. If the
// sink's stored progress is already at or past epoch, it changes nothing.
func (s *Sink) Commit(ctx context.Context, epoch uint64, parts [][]byte) error {
	if epoch > math.MaxInt64 {
		return fmt.Errorf("table %s: epoch %d does not fit the progress table", s.l.table, epoch)
	}
	s.noteEpoch(epoch)
	decoded := make([]part, 0, len(parts))
	for _, b := range parts {
		p, err := s.l.decodePart(b)
		if err != nil {
			return err
		}
		if len(p.vals) > 0 {
			decoded = append(decoded, p)
		}
	}
	if len(decoded) > 0 || !s.preparedPlain() {
		if err := s.apply(ctx, decoded, int64(epoch), true); err != nil {
			return err
		}
	}
	// An epoch without rows on a table already prepared writes nothing:
	// its replay would write nothing either, and an idle job then costs
	// its database no transaction a checkpoint.
	s.mu.Lock()
	s.mu.pending = slices.DeleteFunc(s.mu.pending, func(p pendingPart) bool { return p.epoch <= epoch })
	s.mu.Unlock()
	s.mergeIfDue(ctx)
	return nil
}

// preparedPlain reports whether the sink's table is prepared and is not a
// staged layout's (whose merges follow the progress of every epoch).
func (s *Sink) preparedPlain() bool {
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	return s.db.prepared && !s.db.staged && s.cfg.Layout != LayoutStaged
}

// Close applies the rows still buffered, and those of pre-committed parts no
// Commit covered, in one final transaction and disconnects. When the run
// took checkpoints, the transaction is recorded as the epoch after the
// newest one seen, so the rows of a bounded run and the tail of a drained
// one are written exactly once. Calls after Close fail
// with ErrClosed; Close itself is idempotent.
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	workers := s.mu.workers
	s.mu.workers = nil
	epoch, checkpointed := s.mu.maxEpoch+1, s.mu.sawEpoch
	// Only a run whose whole input arrived publishes: a checkpointed run's
	// end (Close after its final commit), or the end of a run without
	// checkpoints that was not aborted.
	staged := checkpointed && !s.mu.aborted
	pending := s.mu.pending
	s.mu.pending = nil
	s.mu.Unlock()
	var errs []error
	parts := make([]part, 0, len(pending)+1)
	for _, pp := range pending {
		p, err := s.l.decodePart(pp.data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		parts = append(parts, p)
	}
	var rest []any
	for _, wb := range workers {
		wb.mu.Lock()
		rest = append(rest, wb.vals...)
		wb.vals, wb.seen = nil, nil
		wb.mu.Unlock()
	}
	s.buffered.Store(0)
	if len(rest) > 0 {
		parts = append(parts, part{generation: s.cfg.Generation, jobID: s.cfg.JobID, vals: rest})
	}
	if len(parts) > 0 {
		if checkpointed && epoch > math.MaxInt64 {
			checkpointed = false
		}
		err := s.apply(ctx, parts, int64(epoch), checkpointed)
		if err != nil {
			errs = append(errs, fmt.Errorf("writing the last rows: %w", err))
		}
	}
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if s.cfg.Stage != nil && staged && len(errs) == 0 && !s.db.closed {
		// A checkpointed run's end: every epoch is in the staging table.
		err := s.prepareLocked(ctx, true)
		if err == nil {
			err = s.publishLocked(ctx)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if s.db.opened && !s.db.closed {
		if err := s.db.be.close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("table %s: disconnecting: %w", s.l.table, err))
		}
	}
	s.db.closed = true
	return errors.Join(errs...)
}

// Abort ends a run without checkpoints that failed or was cancelled
// (contract.AbortingSink): as Close, except that a partition run's staged
// rows are not published.
func (s *Sink) Abort(ctx context.Context) error {
	s.mu.Lock()
	s.mu.aborted = true
	s.mu.Unlock()
	return s.Close(ctx)
}

// apply writes parts in one transaction; with progress, as epoch.
func (s *Sink) apply(ctx context.Context, parts []part, epoch int64, progress bool) error {
	b := s.batch(parts)
	b.progress, b.sinkID, b.epoch = progress, s.progressID, epoch
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if err := s.prepareLocked(ctx, true); err != nil {
		return err
	}
	_, err := s.db.be.apply(ctx, b)
	if err != nil && !s.db.facade && !s.db.staged {
		// The table may have become a façade view since Prepare (another
		// generation migrated it): join it and write again. The failed
		// transaction changed nothing.
		if joined, jerr := s.viewIsFacadeLocked(ctx); jerr == nil && joined {
			s.joinFacadeLocked()
			if err = s.prepareLocked(ctx, true); err == nil {
				_, err = s.db.be.apply(ctx, b)
			}
		}
	}
	if err != nil {
		if progress {
			return fmt.Errorf("table %s: committing epoch %d (%d rows): %w", s.l.table, epoch, b.n, err)
		}
		return fmt.Errorf("table %s: writing %d rows: %w", s.l.table, b.n, err)
	}
	return nil
}

// batch merges parts into the rows of one transaction. Rows for the same
// conflict key collapse into one first: the newest revision for upsert (a
// statement may not update a row twice), the first occurrence for append.
func (s *Sink) batch(parts []part) *batch {
	l := s.l
	nrec, ncol := l.nrec, len(l.cols)
	total := 0
	for _, p := range parts {
		total += len(p.vals) / nrec
	}
	b := &batch{vals: make([]any, 0, total*ncol)}
	now := mtime.FromTime(s.cfg.Now())
	index := make(map[string]int, total)
	var key []byte
	paneCol := l.byName[colPaneIndex]
	genCol, jobCol := l.byName[colGeneration], l.byName[colJobID]
	for _, p := range parts {
		for off := 0; off+nrec <= len(p.vals); off += nrec {
			rec := p.vals[off : off+nrec]
			key = key[:0]
			for _, k := range l.keys {
				key = appendValue(key, rec[k])
			}
			if at, dup := index[string(key)]; dup {
				if !l.upsert {
					continue
				}
				old := b.vals[at*ncol : (at+1)*ncol]
				if !newer(p.generation, rec[paneCol], old[genCol], old[paneCol]) {
					continue
				}
				copy(old, rec)
				old[genCol], old[jobCol] = p.generation, p.jobID
				continue
			}
			index[string(key)] = b.n
			b.vals = append(b.vals, rec...)
			if l.upsert {
				b.vals = append(b.vals, p.generation, p.jobID, now)
			}
			b.n++
		}
	}
	return b
}

// newer reports whether revision (g1, p1) is strictly newer than (g2, p2).
func newer(g1 int64, p1 any, g2, p2 any) bool {
	og, _ := g2.(int64)
	if g1 != og {
		return g1 > og
	}
	a, _ := p1.(int64)
	c, _ := p2.(int64)
	return a > c
}
