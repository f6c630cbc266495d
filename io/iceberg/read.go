package iceberg

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// ReadConfig configures a read of one table.
type ReadConfig struct {
	Target Target
	// Table is NAMESPACE.TABLE.
	Table string
	// Keep lists the only columns read; Drop the columns not read (Beam's
	// keep and drop; at most one of them).
	Keep, Drop []string
	// Check is the server's file policy, asked about the table's metadata
	// and every file a read opens; nil allows every path.
	Check func(path string) error
	// Filter is Beam's SQL-like filter (ParseFilter): only the rows it
	// holds for are read, and data files that cannot hold one are skipped.
	// "": every row. It may name columns Keep or Drop leave out.
	Filter string
}

// rowFilter parses cfg.Filter and binds it to sc, so that an unknown
// column or a literal the column's type cannot take is a configuration
// error; nil when there is no filter.
func (cfg ReadConfig) rowFilter(sc *iceberg.Schema) (iceberg.BooleanExpression, error) {
	if strings.TrimSpace(cfg.Filter) == "" {
		return nil, nil
	}
	e, err := ParseFilter(cfg.Filter)
	if err != nil {
		return nil, &FilterError{fmt.Errorf("%w: %w", ErrConfig, err)}
	}
	if _, err := iceberg.BindExpr(sc, e, true); err != nil {
		return nil, &FilterError{fmt.Errorf("%w: filter %q on table %s: %v", ErrConfig, cfg.Filter, cfg.Table, err)}
	}
	return e, nil
}

// FilterError is a filter that does not parse, or does not bind to the
// table's columns.
type FilterError struct{ Err error }

// Error implements error.
func (e *FilterError) Error() string { return e.Err.Error() }

// Unwrap returns the error it wraps (ErrConfig and the cause).
func (e *FilterError) Unwrap() error { return e.Err }

// kindOf maps an Iceberg column type to a row kind: integers int,
// floating point float, boolean bool, string string, timestamps and
// dates timestamp; false for the others.
func kindOf(t iceberg.Type) (row.Kind, bool) {
	switch t.(type) {
	case iceberg.Int32Type, iceberg.Int64Type:
		return row.KindInt, true
	case iceberg.Float32Type, iceberg.Float64Type:
		return row.KindFloat, true
	case iceberg.BooleanType:
		return row.KindBool, true
	case iceberg.StringType:
		return row.KindString, true
	case iceberg.TimestampType, iceberg.TimestampTzType, iceberg.DateType:
		return row.KindTimestamp, true
	}
	return 0, false
}

// Describe loads the table and returns the schema of the rows a read
// emits: its columns (after keep or drop), each a nullable field.
func Describe(ctx context.Context, cfg ReadConfig) (*row.Schema, error) {
	id, err := Ident(cfg.Table)
	if err != nil {
		return nil, err
	}
	tbl, done, err := loadTable(ctx, cfg.Target, id)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := checkPaths(cfg.Check, tbl.MetadataLocation(), tbl.Location()); err != nil {
		return nil, err
	}
	if _, err := cfg.rowFilter(tbl.Schema()); err != nil {
		return nil, err
	}
	return readSchema(tbl.Schema(), cfg)
}

func readSchema(sc *iceberg.Schema, cfg ReadConfig) (*row.Schema, error) {
	if len(cfg.Keep) > 0 && len(cfg.Drop) > 0 {
		return nil, fmt.Errorf("%w: keep and drop cannot both be given", ErrConfig)
	}
	var names []string
	for _, f := range sc.Fields() {
		names = append(names, f.Name)
	}
	for _, c := range append(slices.Clone(cfg.Keep), cfg.Drop...) {
		if !slices.Contains(names, c) {
			return nil, fmt.Errorf("%w: table %s has no column %q (its columns: %s)", ErrConfig, cfg.Table, c, strings.Join(names, ", "))
		}
	}
	var fields []row.Field
	for _, f := range sc.Fields() {
		if (len(cfg.Keep) > 0 && !slices.Contains(cfg.Keep, f.Name)) || slices.Contains(cfg.Drop, f.Name) {
			continue
		}
		k, ok := kindOf(f.Type)
		if !ok {
			return nil, fmt.Errorf("%w: column %s of table %s is %s, which weir's rows do not hold (int, long, float, double, boolean, string, date, timestamp): drop it", ErrConfig, f.Name, cfg.Table, f.Type)
		}
		fields = append(fields, row.Field{Name: f.Name, Type: row.Of(k)})
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("%w: no column of table %s is left to read", ErrConfig, cfg.Table)
	}
	return row.NewSchema(fields...)
}

// checkPaths asks check about each file location.
func checkPaths(check func(string) error, locs ...string) error {
	if check == nil {
		return nil
	}
	for _, loc := range locs {
		p, err := FilePath(loc)
		if err != nil {
			return fmt.Errorf("%w: table file %s: %v", ErrConfig, loc, err)
		}
		if err := check(p); err != nil {
			return fmt.Errorf("table file %s: %w", p, err)
		}
	}
	return nil
}

// checkManifests asks check about the files a read of tbl's current
// snapshot opens before its data files: the metadata, the manifest list
// and the manifests. Then it reads every manifest's entries, here:
// iceberg-go's planning reads them on goroutines of its own, where a
// damaged manifest's panic would end the process; here it is recovered
// into an error (ErrDataFile).
func checkManifests(ctx context.Context, tbl *table.Table, check func(string) error) (err error) {
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return checkPaths(check, tbl.MetadataLocation())
	}
	if err := checkPaths(check, tbl.MetadataLocation(), snap.ManifestList); err != nil {
		return err
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return fmt.Errorf("opening the files of %s: %w", tbl.Identifier(), err)
	}
	at := snap.ManifestList
	defer func() {
		if r := recover(); r != nil {
			if at != snap.ManifestList {
				at += " (of the manifest list " + snap.ManifestList + ")"
			}
			err = fmt.Errorf("%w: %s: %v", ErrDataFile, at, r)
		}
	}()
	mans, err := snap.Manifests(fsys)
	if err != nil {
		return fmt.Errorf("%w: reading the manifest list %s: %w", ErrDataFile, at, err)
	}
	for _, m := range mans {
		if err := checkPaths(check, m.FilePath()); err != nil {
			return err
		}
	}
	for _, m := range mans {
		at = m.FilePath()
		for _, err := range m.Entries(fsys, false) {
			if err != nil {
				return fmt.Errorf("%w: reading the manifest %s (of the manifest list %s): %w", ErrDataFile, at, snap.ManifestList, err)
			}
		}
	}
	return nil
}

// Source reads a table's current snapshot once: a bounded source of one
// split.
type Source struct {
	cfg    ReadConfig
	schema *row.Schema
}

// NewSource returns a source of the table's rows as rows of schema
// (Describe's), at the minimum event time in the global window, as
// Beam's ReadFromIceberg (a batch read) does.
func NewSource(cfg ReadConfig, schema *row.Schema) *Source {
	return &Source{cfg: cfg, schema: schema}
}

// Split implements contract.Source: one split.
func (s *Source) Split(ctx context.Context, _ int) ([]contract.SourceSplit, error) {
	return []contract.SourceSplit{&split{s: s}}, nil
}

type split struct {
	s       *Source
	done    func()
	next    func() (arrow.RecordBatch, error, bool)
	stop    func()
	pending []*row.Row
	started bool
	ended   bool
}

func (sp *split) start(ctx context.Context) error {
	sp.started = true
	id, err := Ident(sp.s.cfg.Table)
	if err != nil {
		return err
	}
	tbl, done, err := loadTable(ctx, sp.s.cfg.Target, id)
	if err != nil {
		return err
	}
	sp.done = done
	if err := checkManifests(ctx, tbl, sp.s.cfg.Check); err != nil {
		return err
	}
	opts := []table.ScanOption{table.WithSelectedFields(sp.s.schema.Names()...)}
	filter, err := sp.s.cfg.rowFilter(tbl.Schema())
	if err != nil {
		return err
	}
	if filter != nil {
		opts = append(opts, table.WithRowFilter(filter))
	}
	scan := tbl.Scan(opts...)
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return fmt.Errorf("planning the read of %s: %w", sp.s.cfg.Table, err)
	}
	// The fields iceberg-go reads of a data file: the selected columns
	// and the filter's (and a task's equality deletes' columns).
	ids := map[int]bool{}
	for _, n := range append(sp.s.schema.Names(), filterColumns(sp.s.cfg.Filter)...) {
		if f, ok := tbl.Schema().FindFieldByName(n); ok {
			ids[f.ID] = true
		}
	}
	checked := map[string]bool{} // delete files may apply to several tasks
	for _, t := range tasks {
		files := slices.Concat([]iceberg.DataFile{t.File}, t.DeleteFiles, t.EqualityDeleteFiles, t.DeletionVectorFiles)
		for _, f := range files {
			if err := checkPaths(sp.s.cfg.Check, f.FilePath()); err != nil {
				return err
			}
		}
		read := ids // of the task's data file
		if len(t.EqualityDeleteFiles) > 0 {
			read = maps.Clone(ids)
			for _, d := range t.EqualityDeleteFiles {
				for _, id := range d.EqualityFieldIDs() {
					read[id] = true
				}
			}
		}
		// Only once every file of the task is allowed: a check opens them.
		for _, f := range files {
			if checked[f.FilePath()] {
				continue
			}
			checked[f.FilePath()] = true
			p, err := FilePath(f.FilePath())
			if err != nil {
				return fmt.Errorf("%w: table file %s: %v", ErrConfig, f.FilePath(), err)
			}
			if err := checkTableFile(ctx, f, p, read); err != nil {
				return fmt.Errorf("reading %s: %w", sp.s.cfg.Table, err)
			}
		}
	}
	_, recs, err := scan.ToArrowRecords(ctx)
	if err != nil {
		return fmt.Errorf("reading %s: %w", sp.s.cfg.Table, err)
	}
	sp.next, sp.stop = iter.Pull2(recs)
	return nil
}

// Read implements contract.SourceSplit.
func (sp *split) Read(ctx context.Context, buf []contract.Element) (contract.ReadResult, error) {
	if !sp.started {
		if err := sp.start(ctx); err != nil {
			return contract.ReadResult{}, err
		}
	}
	n := 0
	for n < len(buf) {
		if len(sp.pending) == 0 {
			if sp.ended {
				return contract.ReadResult{N: n, Watermark: mtime.MaxTimestamp, Done: true}, nil
			}
			rec, err, ok := sp.next()
			if !ok {
				sp.ended = true
				continue
			}
			if err != nil {
				return contract.ReadResult{N: n}, fmt.Errorf("reading %s: %w", sp.s.cfg.Table, err)
			}
			sp.pending, err = toRows(rec, sp.s.schema)
			rec.Release()
			if err != nil {
				return contract.ReadResult{N: n}, fmt.Errorf("reading %s: %w", sp.s.cfg.Table, err)
			}
			continue
		}
		buf[n] = contract.Element{Value: sp.pending[0], Time: mtime.MinTimestamp, Window: window.Global, Pane: window.NoFiring}
		sp.pending = sp.pending[1:]
		n++
	}
	return contract.ReadResult{N: n, Watermark: mtime.MinTimestamp}, nil
}

// Close implements contract.SourceSplit.
func (sp *split) Close() error {
	if sp.stop != nil {
		sp.stop()
	}
	if sp.done != nil {
		sp.done()
	}
	return nil
}

// toRows converts a record batch into rows of s, by column name.
func toRows(rec arrow.RecordBatch, s *row.Schema) ([]*row.Row, error) {
	n := int(rec.NumRows())
	rows := make([]*row.Row, n)
	for i := range rows {
		rows[i] = row.New(s)
	}
	for c, f := range rec.Schema().Fields() {
		j := s.Index(f.Name)
		if j < 0 {
			continue
		}
		col := rec.Column(c)
		for i := range n {
			if col.IsNull(i) {
				continue
			}
			v, err := value(col, i)
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", f.Name, err)
			}
			rows[i].Values[j] = v
		}
	}
	return rows, nil
}

// value is the row value of a non-null arrow value.
func value(col arrow.Array, i int) (any, error) {
	switch a := col.(type) {
	case *array.Int64:
		return a.Value(i), nil
	case *array.Int32:
		return int64(a.Value(i)), nil
	case *array.Float64:
		return a.Value(i), nil
	case *array.Float32:
		return float64(a.Value(i)), nil
	case *array.Boolean:
		return a.Value(i), nil
	case *array.String:
		return a.Value(i), nil
	case *array.LargeString:
		return a.Value(i), nil
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return mtime.FromTime(a.Value(i).ToTime(unit)), nil
	case *array.Date32:
		return mtime.FromTime(a.Value(i).ToTime()), nil
	case *array.Date64:
		return mtime.FromTime(time.UnixMilli(int64(a.Value(i)))), nil
	}
	return nil, fmt.Errorf("a %s value is not one weir reads", col.DataType())
}
