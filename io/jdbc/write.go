package jdbc

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// ProgressTable records, per sink, the last epoch whose rows are in.
const ProgressTable = "weir_jdbc_progress"

// SinkConfig configures a Sink.
type SinkConfig struct {
	Target Target
	Init   []string
	// Table is the table rows are inserted into (schema-qualified allowed);
	// it is created with the rows' fields as nullable columns when missing.
	Table string
	// SinkID keys the sink's progress record; empty for a run without
	// checkpoints, which inserts its rows at Close.
	SinkID string
	// Workers is the number of workers that call Write (default 1; more
	// are accepted).
	Workers int
}

// Sink inserts rows. See the package documentation for its commits.
type Sink struct {
	cfg    SinkConfig
	schema *row.Schema

	// mu guards the fields below; a worker's buffer has its own lock.
	mu       sync.Mutex
	db       *sql.DB
	prepared bool
	bufs     map[int]*workerBuf
	sawEpoch bool
	closed   bool

	// buffered is about how many bytes the workers' buffers hold
	// (BufferedBytes).
	buffered atomic.Int64
}

var _ contract.BufferingSink = (*Sink)(nil)

// rowBytes is what BufferedBytes counts for a buffered row of n values:
// its slice and, per value, its interface and a typical payload.
func rowBytes(n int) int64 { return int64(24 + 32*n) }

// BufferedBytes returns about how many bytes of rows the workers wrote
// that no PreCommit took yet (contract.BufferingSink): the sink holds them
// in memory until then.
func (s *Sink) BufferedBytes() int64 { return s.buffered.Load() }

type workerBuf struct {
	mu   sync.Mutex
	rows [][]any
}

// NewSink returns a sink of rows of schema s.
func NewSink(cfg SinkConfig, s *row.Schema) (*Sink, error) {
	if strings.TrimSpace(cfg.Table) == "" {
		return nil, fmt.Errorf("%w: table is required", ErrConfig)
	}
	for _, f := range s.Fields {
		if sqlType(cfg.Target.Type, f.Type.Kind) == "" {
			return nil, fmt.Errorf("%w: field %s is %s, which a JDBC table column cannot hold (int, float, bool, string, timestamp, or a row or list as JSON)", ErrConfig, f.Name, f.Type)
		}
	}
	return &Sink{cfg: cfg, schema: s, bufs: map[int]*workerBuf{}}, nil
}

// sqlType is the column type created for kind k ("" for none).
func sqlType(typ string, k row.Kind) string {
	switch k {
	case row.KindInt:
		return "BIGINT"
	case row.KindFloat:
		if typ == MySQL {
			return "DOUBLE"
		}
		return "DOUBLE PRECISION"
	case row.KindBool:
		return "BOOLEAN"
	case row.KindString:
		return "TEXT"
	case row.KindTimestamp:
		if typ == MySQL {
			return "DATETIME(3)"
		}
		return "TIMESTAMPTZ"
	case row.KindRow, row.KindList:
		return "TEXT" // as JSON
	}
	return ""
}

// Validate connects and, when the table exists, checks that it has a
// column for every field; it creates nothing (a submission's check).
func (s *Sink) Validate(ctx context.Context) error {
	db, err := open(s.cfg.Target, s.cfg.Init)
	if err != nil {
		return err
	}
	defer db.Close()
	cols, err := columns(ctx, db, s.cfg.Target.Type, s.cfg.Table)
	if err != nil || cols == nil {
		return err
	}
	return s.checkColumns(cols)
}

func (s *Sink) checkColumns(cols map[string]bool) error {
	var missing []string
	for _, f := range s.schema.Fields {
		if !cols[strings.ToLower(f.Name)] {
			missing = append(missing, f.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: table %s has no column %s for the rows' field(s): add them, or write to another table", ErrConfig, s.cfg.Table, strings.Join(missing, ", "))
	}
	return nil
}

// Prepare connects, creates the table when it is missing (and the
// progress table), and checks that the table has a column for every
// field. It is called before the first write.
func (s *Sink) Prepare(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.prepareLocked(ctx)
}

func (s *Sink) prepareLocked(ctx context.Context) error {
	if s.prepared {
		return nil
	}
	if s.db == nil {
		db, err := open(s.cfg.Target, s.cfg.Init)
		if err != nil {
			return err
		}
		s.db = db
	}
	typ := s.cfg.Target.Type
	cols, err := columns(ctx, s.db, typ, s.cfg.Table)
	if err != nil {
		return err
	}
	if cols == nil {
		defs := make([]string, len(s.schema.Fields))
		for i, f := range s.schema.Fields {
			defs[i] = quote(typ, f.Name) + " " + sqlType(typ, f.Type.Kind)
		}
		if _, err := s.db.ExecContext(ctx, "CREATE TABLE "+quote(typ, s.cfg.Table)+" ("+strings.Join(defs, ", ")+")"); err != nil {
			return fmt.Errorf("creating table %s: %w", s.cfg.Table, err)
		}
	} else if err := s.checkColumns(cols); err != nil {
		return err
	}
	if s.cfg.SinkID != "" {
		if _, err := s.db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+ProgressTable+" (sink_id VARCHAR(255) PRIMARY KEY, epoch BIGINT NOT NULL)"); err != nil {
			return fmt.Errorf("creating %s: %w", ProgressTable, err)
		}
	}
	s.prepared = true
	return nil
}

// columns returns the lower-cased column names of table, or nil when it
// does not exist.
func columns(ctx context.Context, db *sql.DB, typ, table string) (map[string]bool, error) {
	rows, err := db.QueryContext(ctx, "SELECT * FROM "+quote(typ, table)+" WHERE 1 = 0")
	if err != nil {
		if missingTable(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the columns of table %s: %w", table, err)
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[strings.ToLower(n)] = true
	}
	return out, nil
}

// missingTable reports a "no such table" error of PostgreSQL (42P01) or
// MySQL (1146).
func missingTable(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "42P01") || strings.Contains(msg, "Error 1146")
}

// Write implements contract.Sink: the rows wait in worker's buffer.
func (s *Sink) Write(ctx context.Context, worker int, elems []contract.Element) error {
	s.mu.Lock()
	b := s.bufs[worker]
	if b == nil {
		b = &workerBuf{}
		s.bufs[worker] = b
	}
	s.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range elems {
		r, ok := elems[i].Value.(*row.Row)
		if !ok {
			return fmt.Errorf("a JDBC sink writes rows, not %T", elems[i].Value)
		}
		vals := make([]any, len(s.schema.Fields))
		for j, f := range s.schema.Fields {
			k := r.Schema.Index(f.Name)
			if k < 0 {
				continue
			}
			v := r.Values[k]
			switch f.Type.Kind {
			case row.KindRow, row.KindList:
				if v != nil {
					v = string(row.AppendJSONValue(nil, v))
				}
			}
			vals[j] = v
		}
		b.rows = append(b.rows, vals)
		s.buffered.Add(rowBytes(len(vals)))
	}
	return nil
}

// PreCommit implements contract.TransactionalSink: worker's rows since its
// last pre-commit, encoded.
func (s *Sink) PreCommit(ctx context.Context, worker int, epoch uint64) ([]byte, error) {
	s.mu.Lock()
	s.sawEpoch = true
	b := s.bufs[worker]
	s.mu.Unlock()
	if b == nil {
		return encodeRows(nil), nil
	}
	b.mu.Lock()
	rows := b.rows
	b.rows = nil
	s.buffered.Add(-int64(len(rows)) * rowBytes(len(s.schema.Fields)))
	b.mu.Unlock()
	return encodeRows(rows), nil
}

// Commit implements contract.TransactionalSink: inserts every part's rows
// and records epoch, in one transaction; an epoch recorded already
// inserts nothing.
func (s *Sink) Commit(ctx context.Context, epoch uint64, parts [][]byte) error {
	var rows [][]any
	for _, p := range parts {
		rs, err := decodeRows(p, len(s.schema.Fields))
		if err != nil {
			return err
		}
		rows = append(rows, rs...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.prepareLocked(ctx); err != nil {
		return err
	}
	return s.insert(ctx, rows, epoch, true)
}

// insert writes rows in one transaction; with progress, only when epoch
// is not recorded yet, and records it.
func (s *Sink) insert(ctx context.Context, rows [][]any, epoch uint64, progress bool) error {
	typ := s.cfg.Target.Type
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("table %s: %w", s.cfg.Table, err)
	}
	defer tx.Rollback()
	if progress && s.cfg.SinkID != "" {
		ph := "$1"
		if typ == MySQL {
			ph = "?"
		}
		var done int64
		err := tx.QueryRowContext(ctx, "SELECT epoch FROM "+ProgressTable+" WHERE sink_id = "+ph+" FOR UPDATE", s.cfg.SinkID).Scan(&done)
		switch {
		case err == nil && epoch <= math.MaxInt64 && int64(epoch) <= done:
			return nil // committed before (a commit repeated after a restart)
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("reading the progress of %s: %w", s.cfg.SinkID, err)
		}
	}
	const batch = 500
	names := make([]string, len(s.schema.Fields))
	for i, f := range s.schema.Fields {
		names[i] = quote(typ, f.Name)
	}
	head := "INSERT INTO " + quote(typ, s.cfg.Table) + " (" + strings.Join(names, ", ") + ") VALUES "
	for lo := 0; lo < len(rows); lo += batch {
		hi := min(lo+batch, len(rows))
		var b strings.Builder
		b.WriteString(head)
		args := make([]any, 0, (hi-lo)*len(names))
		for i, r := range rows[lo:hi] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('(')
			for j, v := range r {
				if j > 0 {
					b.WriteString(", ")
				}
				if typ == MySQL {
					b.WriteByte('?')
				} else {
					b.WriteString("$" + strconv.Itoa(len(args)+1))
				}
				args = append(args, sqlValue(v))
			}
			b.WriteByte(')')
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("inserting into %s: %w", s.cfg.Table, err)
		}
	}
	if progress && s.cfg.SinkID != "" {
		q := "INSERT INTO " + ProgressTable + " (sink_id, epoch) VALUES ($1, $2) ON CONFLICT (sink_id) DO UPDATE SET epoch = EXCLUDED.epoch"
		if typ == MySQL {
			q = "INSERT INTO " + ProgressTable + " (sink_id, epoch) VALUES (?, ?) ON DUPLICATE KEY UPDATE epoch = VALUES(epoch)"
		}
		if _, err := tx.ExecContext(ctx, q, s.cfg.SinkID, int64(epoch)); err != nil {
			return fmt.Errorf("recording the progress of %s: %w", s.cfg.SinkID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing to %s: %w", s.cfg.Table, err)
	}
	return nil
}

// sqlValue is the driver argument of a row value.
func sqlValue(v any) any {
	if t, ok := v.(mtime.Time); ok {
		return t.ToTime().UTC()
	}
	return v
}

// Close implements contract.Sink. A run that took no checkpoint inserts
// its rows now; a checkpointed one's rows not pre-committed are not
// covered by a commit and are left out (its next execution reads them
// again).
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	if !s.sawEpoch {
		var rows [][]any
		for _, b := range s.bufs {
			b.mu.Lock()
			rows = append(rows, b.rows...)
			b.rows = nil
			b.mu.Unlock()
		}
		s.buffered.Store(0)
		if len(rows) > 0 {
			if err := s.prepareLocked(ctx); err != nil {
				errs = append(errs, err)
			} else if err := s.insert(ctx, rows, 0, false); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if s.db != nil {
		errs = append(errs, s.db.Close())
	}
	return errors.Join(errs...)
}

// Row values in a pre-commit part: a count, then per value a tag and its
// payload.
const (
	tagNull = iota
	tagInt
	tagFloat
	tagString
	tagBool
	tagTime
)

func encodeRows(rows [][]any) []byte {
	b := binary.AppendUvarint(nil, uint64(len(rows)))
	for _, r := range rows {
		for _, v := range r {
			switch x := v.(type) {
			case int64:
				b = binary.AppendVarint(append(b, tagInt), x)
			case float64:
				b = binary.BigEndian.AppendUint64(append(b, tagFloat), math.Float64bits(x))
			case string:
				b = append(binary.AppendUvarint(append(b, tagString), uint64(len(x))), x...)
			case bool:
				t := byte(0)
				if x {
					t = 1
				}
				b = append(b, tagBool, t)
			case mtime.Time:
				b = binary.AppendVarint(append(b, tagTime), int64(x))
			case time.Time:
				b = binary.AppendVarint(append(b, tagTime), int64(mtime.FromTime(x)))
			default:
				b = append(b, tagNull)
			}
		}
	}
	return b
}

func decodeRows(b []byte, width int) ([][]any, error) {
	bad := errors.New("a JDBC sink's pre-commit part is damaged")
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, bad
	}
	b = b[k:]
	rows := make([][]any, 0, n)
	for range n {
		r := make([]any, width)
		for j := range width {
			if len(b) == 0 {
				return nil, bad
			}
			tag := b[0]
			b = b[1:]
			switch tag {
			case tagNull:
			case tagInt, tagTime:
				v, k := binary.Varint(b)
				if k <= 0 {
					return nil, bad
				}
				b = b[k:]
				if tag == tagTime {
					r[j] = mtime.Time(v)
				} else {
					r[j] = v
				}
			case tagFloat:
				if len(b) < 8 {
					return nil, bad
				}
				r[j] = math.Float64frombits(binary.BigEndian.Uint64(b))
				b = b[8:]
			case tagString:
				l, k := binary.Uvarint(b)
				if k <= 0 || uint64(len(b)-k) < l {
					return nil, bad
				}
				r[j] = string(b[k : k+int(l)])
				b = b[k+int(l):]
			case tagBool:
				if len(b) < 1 {
					return nil, bad
				}
				r[j] = b[0] == 1
				b = b[1:]
			default:
				return nil, bad
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}
