package iceberg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// Snapshot summary properties of a sink's commits.
const (
	// SummarySinkID names the sink whose epoch a snapshot holds.
	SummarySinkID = "weir.sink-id"
	// SummaryEpoch is the checkpoint epoch a snapshot holds.
	SummaryEpoch = "weir.epoch"
)

// SinkConfig configures a Sink.
type SinkConfig struct {
	Target Target
	// Table is NAMESPACE.TABLE; it is created (with its namespace) from
	// the rows' schema when missing, in Target.Warehouse.
	Table string
	// Properties are the table properties of a table the sink creates
	// (Beam's table_properties).
	Properties map[string]string
	// PartitionFields partition a table the sink creates (Beam's
	// partition_fields): COL, or TRANSFORM(COL) with year, month, day,
	// hour or void, or bucket(COL, N) or truncate(COL, N).
	PartitionFields []string
	// Keep lists the only fields written; Drop the fields not written
	// (Beam's keep and drop; at most one of them).
	Keep, Drop []string
	// SinkID keys the epochs in the snapshots' summaries; empty for a run
	// without checkpoints, which appends its rows at Close.
	SinkID string
	// Check is the server's file policy, asked about the table's location
	// before anything is written; nil allows every path.
	Check func(path string) error
}

// Sink appends rows to a table. See the package documentation for its
// commits.
type Sink struct {
	cfg       SinkConfig
	schema    *row.Schema
	id        table.Identifier
	newSchema *iceberg.Schema
	spec      iceberg.PartitionSpec

	// mu guards the fields below; a worker's buffer has its own lock.
	mu       sync.Mutex
	cat      catalog.Catalog
	closeCat func() error
	arrow    *arrow.Schema
	fields   []int // per arrow column, the row field it holds (-1: null)
	bufs     map[int]*workerBuf
	sawEpoch bool
	closed   bool

	// buffered is what the workers' buffers hold, in bytes of their
	// values (BufferedBytes).
	buffered atomic.Int64
}

type workerBuf struct {
	mu sync.Mutex
	b  *array.RecordBuilder
	// n is what b holds, in bytes of its values (valueBytes).
	n int64
}

var _ contract.BufferingSink = (*Sink)(nil)

// BufferedBytes implements contract.BufferingSink: the bytes of the rows
// the workers wrote that no PreCommit took yet. The sink holds them in
// memory, as Arrow columns, until the checkpoint that commits them.
func (s *Sink) BufferedBytes() int64 { return s.buffered.Load() }

// valueBytes is what a value takes in an Arrow column: 8 bytes for a
// number or a time, its length and a 4-byte offset for a string, 1 for a
// bool or a null.
func valueBytes(v any) int64 {
	switch x := v.(type) {
	case string:
		return int64(len(x)) + 4
	case int64, float64, mtime.Time:
		return 8
	}
	return 1
}

// icebergType is the column type created for kind k (nil for none).
func icebergType(k row.Kind) iceberg.Type {
	switch k {
	case row.KindInt:
		return iceberg.PrimitiveTypes.Int64
	case row.KindFloat:
		return iceberg.PrimitiveTypes.Float64
	case row.KindBool:
		return iceberg.PrimitiveTypes.Bool
	case row.KindString:
		return iceberg.PrimitiveTypes.String
	case row.KindTimestamp:
		return iceberg.PrimitiveTypes.TimestampTz
	}
	return nil
}

// NewSink returns a sink of rows of schema s.
func NewSink(cfg SinkConfig, s *row.Schema) (*Sink, error) {
	id, err := Ident(cfg.Table)
	if err != nil {
		return nil, err
	}
	if s, err = project(s, cfg.Keep, cfg.Drop); err != nil {
		return nil, err
	}
	fields := make([]iceberg.NestedField, len(s.Fields))
	for i, f := range s.Fields {
		typ := icebergType(f.Type.Kind)
		if typ == nil {
			return nil, fmt.Errorf("%w: field %s is %s, which weir does not write to an Iceberg column (int, float, bool, string, timestamp): map it to one first", ErrConfig, f.Name, f.Type)
		}
		fields[i] = iceberg.NestedField{ID: i + 1, Name: f.Name, Type: typ}
	}
	sk := &Sink{cfg: cfg, schema: s, id: id, newSchema: iceberg.NewSchema(0, fields...), bufs: map[int]*workerBuf{}}
	if sk.spec, err = partitionSpec(cfg.PartitionFields, sk.newSchema); err != nil {
		return nil, err
	}
	return sk, nil
}

// project keeps s's fields in keep (all when empty) less those in drop.
func project(s *row.Schema, keep, drop []string) (*row.Schema, error) {
	if len(keep) > 0 && len(drop) > 0 {
		return nil, fmt.Errorf("%w: keep and drop cannot both be given", ErrConfig)
	}
	for _, n := range slices.Concat(keep, drop) {
		if s.Index(n) < 0 {
			return nil, fmt.Errorf("%w: the rows have no field %q (their fields: %s)", ErrConfig, n, strings.Join(s.Names(), ", "))
		}
	}
	if len(keep)+len(drop) == 0 {
		return s, nil
	}
	var out []row.Field
	for _, f := range s.Fields {
		if (len(keep) == 0 || slices.Contains(keep, f.Name)) && !slices.Contains(drop, f.Name) {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no field is left to write", ErrConfig)
	}
	return row.NewSchema(out...)
}

// partitionRE matches a partition field: COL, FN(COL) or FN(COL, N).
var partitionRE = regexp.MustCompile(`^\s*(?:(\w+)\s*\(\s*([^,()\s]+)\s*(?:,\s*(\d+)\s*)?\)|([^,()\s]+))\s*$`)

// partitionSpec parses Beam's partition_fields against sc.
func partitionSpec(fields []string, sc *iceberg.Schema) (iceberg.PartitionSpec, error) {
	var opts []iceberg.PartitionOption
	for _, f := range fields {
		m := partitionRE.FindStringSubmatch(f)
		if m == nil {
			return iceberg.PartitionSpec{}, fmt.Errorf("%w: partition field %q: want COL, year(COL), month(COL), day(COL), hour(COL), void(COL), bucket(COL, N) or truncate(COL, N)", ErrConfig, f)
		}
		fn, col, n := strings.ToLower(m[1]), m[2], m[3]
		if fn == "" {
			fn, col = "identity", m[4]
		}
		spec, name := fn, col+"_"+fn
		switch {
		case fn == "identity" && n == "":
			name = col
		case (fn == "bucket" || fn == "truncate") && n != "":
			spec = fn + "[" + n + "]"
			if fn == "truncate" {
				name = col + "_trunc"
			}
		case (fn == "year" || fn == "month" || fn == "day" || fn == "hour" || fn == "void") && n == "":
		default:
			return iceberg.PartitionSpec{}, fmt.Errorf("%w: partition field %q: want COL, year(COL), month(COL), day(COL), hour(COL), void(COL), bucket(COL, N) or truncate(COL, N)", ErrConfig, f)
		}
		tr, err := iceberg.ParseTransform(spec)
		if err != nil {
			return iceberg.PartitionSpec{}, fmt.Errorf("%w: partition field %q: %v", ErrConfig, f, err)
		}
		if src, ok := sc.FindFieldByName(col); ok && !tr.CanTransform(src.Type) {
			return iceberg.PartitionSpec{}, fmt.Errorf("%w: partition field %q: %s does not apply to %s column %s", ErrConfig, f, tr, src.Type, col)
		}
		opts = append(opts, iceberg.AddPartitionFieldByName(col, name, tr, sc, nil))
	}
	spec, err := iceberg.NewPartitionSpecOpts(opts...)
	if err != nil {
		return iceberg.PartitionSpec{}, fmt.Errorf("%w: partition_fields: %v", ErrConfig, err)
	}
	return spec, nil
}

// Validate opens the catalog and, when the table exists, checks it takes
// the rows; it creates nothing (a submission's check).
func (s *Sink) Validate(ctx context.Context) error {
	cat, closeCat, err := open(ctx, s.cfg.Target)
	if err != nil {
		return err
	}
	defer closeCat()
	tbl, err := cat.LoadTable(ctx, s.id)
	switch {
	case errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace):
		if s.cfg.Target.Warehouse == "" {
			return fmt.Errorf("%w: table %s does not exist: catalog_properties needs warehouse (a local directory) to create it", ErrConfig, s.cfg.Table)
		}
		return nil
	case err != nil:
		return fmt.Errorf("loading table %s: %w", s.cfg.Table, err)
	}
	_, _, err = s.columns(tbl)
	return err
}

// prepareLocked opens the catalog, creates the table when missing and
// maps the rows onto its columns.
func (s *Sink) prepareLocked(ctx context.Context) error {
	if s.arrow != nil {
		return nil
	}
	if s.cat == nil {
		cat, closeCat, err := open(ctx, s.cfg.Target)
		if err != nil {
			return err
		}
		s.cat, s.closeCat = cat, closeCat
	}
	tbl, err := s.cat.LoadTable(ctx, s.id)
	if errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace) {
		tbl, err = s.create(ctx)
	}
	if err != nil {
		return fmt.Errorf("table %s: %w", s.cfg.Table, err)
	}
	if err := checkPaths(s.cfg.Check, tbl.MetadataLocation(), tbl.Location()); err != nil {
		return err
	}
	s.arrow, s.fields, err = s.columns(tbl)
	return err
}

// create creates the table (and its namespace) from the rows' schema.
func (s *Sink) create(ctx context.Context) (*table.Table, error) {
	if s.cfg.Target.Warehouse == "" {
		return nil, fmt.Errorf("%w: it does not exist: catalog_properties needs warehouse (a local directory) to create it", ErrConfig)
	}
	if err := checkPaths(s.cfg.Check, s.cfg.Target.Warehouse); err != nil {
		return nil, err
	}
	ns := catalog.NamespaceFromIdent(s.id)
	if ok, err := s.cat.CheckNamespaceExists(ctx, ns); err != nil {
		return nil, err
	} else if !ok {
		if err := s.cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
			return nil, fmt.Errorf("creating namespace %s: %w", strings.Join(ns, "."), err)
		}
	}
	tbl, err := s.cat.CreateTable(ctx, s.id, s.newSchema, catalog.WithProperties(s.cfg.Properties), catalog.WithPartitionSpec(&s.spec))
	if errors.Is(err, catalog.ErrTableAlreadyExists) { // made meanwhile by another writer
		return s.cat.LoadTable(ctx, s.id)
	}
	return tbl, err
}

// columns maps the rows' fields onto tbl's columns: every field needs a
// column that holds its kind, and every column without a field must be
// optional.
func (s *Sink) columns(tbl *table.Table) (*arrow.Schema, []int, error) {
	sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
	if err != nil {
		return nil, nil, fmt.Errorf("table %s: %w", s.cfg.Table, err)
	}
	idx := make([]int, len(sc.Fields()))
	used := 0
	for i, col := range tbl.Schema().Fields() {
		idx[i] = s.schema.Index(col.Name)
		if idx[i] < 0 {
			if col.Required {
				return nil, nil, fmt.Errorf("%w: table %s requires column %s, which the rows lack", ErrConfig, s.cfg.Table, col.Name)
			}
			continue
		}
		used++
		f := s.schema.Fields[idx[i]]
		if k, ok := kindOf(col.Type); !ok || (k != f.Type.Kind && !(k == row.KindFloat && f.Type.Kind == row.KindInt)) {
			return nil, nil, fmt.Errorf("%w: column %s of table %s is %s, which cannot hold field %s (%s)", ErrConfig, col.Name, s.cfg.Table, col.Type, f.Name, f.Type)
		}
	}
	if used < len(s.schema.Fields) {
		var missing []string
		for _, f := range s.schema.Fields {
			if _, ok := tbl.Schema().FindFieldByName(f.Name); !ok {
				missing = append(missing, f.Name)
			}
		}
		return nil, nil, fmt.Errorf("%w: table %s has no column %s for the rows' field(s): add them, or write to another table", ErrConfig, s.cfg.Table, strings.Join(missing, ", "))
	}
	return sc, idx, nil
}

// Write implements contract.Sink: the rows wait in worker's buffer.
func (s *Sink) Write(ctx context.Context, worker int, elems []contract.Element) error {
	s.mu.Lock()
	if err := s.prepareLocked(ctx); err != nil {
		s.mu.Unlock()
		return err
	}
	b := s.bufs[worker]
	if b == nil {
		b = &workerBuf{b: array.NewRecordBuilder(memory.DefaultAllocator, s.arrow)}
		s.bufs[worker] = b
	}
	s.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	var n int64
	defer func() {
		// What was appended is held, a failed row's first columns too.
		b.n += n
		s.buffered.Add(n)
	}()
	for i := range elems {
		r, ok := elems[i].Value.(*row.Row)
		if !ok {
			return fmt.Errorf("an Iceberg sink writes rows, not %T", elems[i].Value)
		}
		for c, j := range s.fields {
			var v any
			if j >= 0 {
				if k := r.Schema.Index(s.schema.Fields[j].Name); k >= 0 {
					v = r.Values[k]
				}
			}
			if err := appendValue(b.b.Field(c), v); err != nil {
				return fmt.Errorf("column %s: %w", s.arrow.Field(c).Name, err)
			}
			n += valueBytes(v)
		}
	}
	return nil
}

// appendValue appends a row value to a column builder.
func appendValue(b array.Builder, v any) error {
	if v == nil {
		b.AppendNull()
		return nil
	}
	ok := false
	switch b := b.(type) {
	case *array.Int64Builder:
		ok = put(b.Append, v)
	case *array.BooleanBuilder:
		ok = put(b.Append, v)
	case *array.StringBuilder:
		ok = put(b.Append, v)
	case *array.LargeStringBuilder:
		ok = put(b.Append, v)
	case *array.Int32Builder:
		x, is := v.(int64)
		if ok = is && x >= math.MinInt32 && x <= math.MaxInt32; ok {
			b.Append(int32(x))
		}
	case *array.Float64Builder:
		var f float64
		if f, ok = toFloat(v); ok {
			b.Append(f)
		}
	case *array.Float32Builder:
		var f float64
		if f, ok = toFloat(v); ok {
			b.Append(float32(f))
		}
	case *array.TimestampBuilder:
		var t mtime.Time
		if t, ok = v.(mtime.Time); ok {
			ts, err := arrow.TimestampFromTime(t.ToTime(), b.Type().(*arrow.TimestampType).Unit)
			if err != nil {
				return err
			}
			b.Append(ts)
		}
	case *array.Date32Builder:
		var t mtime.Time
		if t, ok = v.(mtime.Time); ok {
			b.Append(arrow.Date32FromTime(t.ToTime()))
		}
	}
	if !ok {
		return fmt.Errorf("a %T value (%v) does not fit a %s column", v, v, b.Type())
	}
	return nil
}

// put appends v with add when it is a T.
func put[T any](add func(T), v any) bool {
	x, ok := v.(T)
	if ok {
		add(x)
	}
	return ok
}

// toFloat is an int or float value as a float.
func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	}
	return 0, false
}

// take returns worker b's rows as a record (nil when none), starts a new
// one, and takes them off s's buffered bytes.
func (b *workerBuf) take(s *Sink) arrow.RecordBatch {
	b.mu.Lock()
	defer b.mu.Unlock()
	s.buffered.Add(-b.n)
	b.n = 0
	rec := b.b.NewRecordBatch()
	if rec.NumRows() == 0 {
		rec.Release()
		return nil
	}
	return rec
}

// PreCommit implements contract.TransactionalSink: worker's rows since its
// last pre-commit, as a part (part.go; empty for none).
func (s *Sink) PreCommit(ctx context.Context, worker int, epoch uint64) ([]byte, error) {
	s.mu.Lock()
	s.sawEpoch = true
	b := s.bufs[worker]
	s.mu.Unlock()
	if b == nil {
		return nil, nil
	}
	rec := b.take(s)
	if rec == nil {
		return nil, nil
	}
	defer rec.Release()
	part, err := encodePart(rec)
	if err != nil {
		return nil, fmt.Errorf("encoding the rows of table %s: %w", s.cfg.Table, err)
	}
	return part, nil
}

// Commit implements contract.TransactionalSink: appends every part's rows
// as one snapshot recording epoch; an epoch a snapshot of this sink
// records already appends nothing.
func (s *Sink) Commit(ctx context.Context, epoch uint64, parts [][]byte) error {
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		rs, err := decodePart(p)
		if err != nil {
			return err
		}
		recs = append(recs, rs...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(recs) == 0 {
		return nil
	}
	if err := s.prepareLocked(ctx); err != nil {
		return err
	}
	return s.appendLocked(ctx, recs, epoch, s.cfg.SinkID != "")
}

// appendLocked appends recs as one snapshot; with progress, only when no
// snapshot records this sink at epoch or later, and records epoch.
func (s *Sink) appendLocked(ctx context.Context, recs []arrow.RecordBatch, epoch uint64, progress bool) error {
	tbl, err := s.cat.LoadTable(ctx, s.id)
	if err != nil {
		return fmt.Errorf("loading table %s: %w", s.cfg.Table, err)
	}
	var props iceberg.Properties
	if progress {
		if done, ok := CommittedEpoch(tbl, s.cfg.SinkID); ok && done >= epoch {
			return nil // committed before (a commit repeated after a restart)
		}
		props = iceberg.Properties{SummarySinkID: s.cfg.SinkID, SummaryEpoch: strconv.FormatUint(epoch, 10)}
	}
	if progress {
		if err := s.clearOwnClaimLocked(tbl); err != nil {
			return err
		}
	}
	at := array.NewTableFromRecords(s.arrow, recs)
	defer at.Release()
	if _, err := tbl.AppendTable(ctx, at, 1<<16, props); err != nil {
		return fmt.Errorf("appending to table %s: %w", s.cfg.Table, err)
	}
	return nil
}

// clearOwnClaimLocked removes the claim a commit of this sink left on the
// table's next metadata version when its process was killed: a hadoop
// catalog's commit renames the new metadata to v<N>.metadata.json.claim,
// then the claim to v<N>.metadata.json, and honours a claim for a minute,
// so the job's first commit after a crash in between would fail for that
// long. A claim whose new snapshot records this sink is one of its own
// commits: a sink's commits are serialized (s.mu), and one of an earlier
// process is dead, or fenced (its checkpoint cannot commit), and would
// have appended the same rows at the same epoch. Its removal is safe
// either way: the catalog renames without replacing, so a writer still
// holding the claim fails instead of publishing a second version N. A
// claim of another writer, or one that does not parse, is left to the
// catalog. Only tables whose metadata is in a local directory have such
// claims here.
func (s *Sink) clearOwnClaimLocked(tbl *table.Table) error {
	path, err := FilePath(tbl.MetadataLocation())
	if err != nil || !filepath.IsAbs(path) {
		return nil
	}
	v, ok := metadataVersion(filepath.Base(path))
	if !ok {
		return nil
	}
	claim := filepath.Join(filepath.Dir(path), fmt.Sprintf("v%d.metadata.json.claim", v+1))
	b, err := os.ReadFile(claim)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the claim %s on table %s: %w", claim, s.cfg.Table, err)
	}
	md, err := table.ParseMetadataBytes(b)
	if err != nil {
		return nil
	}
	snap := md.CurrentSnapshot()
	if snap == nil || snap.Summary == nil || snap.Summary.Properties[SummarySinkID] != s.cfg.SinkID {
		return nil
	}
	if err := os.Remove(claim); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the claim %s a killed commit of table %s left: %w", claim, s.cfg.Table, err)
	}
	return nil
}

// metadataVersion returns N of a metadata file named vN.metadata.json
// (or vN.gz.metadata.json).
func metadataVersion(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "v")
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, false
	}
	v, err := strconv.Atoi(num)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// CommittedEpoch returns the latest epoch of sinkID that a snapshot of
// tbl records.
func CommittedEpoch(tbl *table.Table, sinkID string) (uint64, bool) {
	var best uint64
	found := false
	for _, snap := range tbl.Metadata().Snapshots() {
		if snap.Summary == nil || snap.Summary.Properties[SummarySinkID] != sinkID {
			continue
		}
		if e, err := strconv.ParseUint(snap.Summary.Properties[SummaryEpoch], 10, 64); err == nil && (!found || e > best) {
			best, found = e, true
		}
	}
	return best, found
}

// Close implements contract.Sink. A run that took no checkpoint appends
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
	var recs []arrow.RecordBatch
	for _, b := range s.bufs {
		if !s.sawEpoch {
			if rec := b.take(s); rec != nil {
				recs = append(recs, rec)
			}
		}
		b.b.Release()
	}
	if len(recs) > 0 {
		errs = append(errs, s.appendLocked(ctx, recs, 0, false))
		for _, r := range recs {
			r.Release()
		}
	}
	if s.closeCat != nil {
		errs = append(errs, s.closeCat())
	}
	return errors.Join(errs...)
}
