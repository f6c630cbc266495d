package yamlpipe

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/io/sqlsink"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// sqlValidateTimeout bounds the submit-time check of a WriteToSql table.
const sqlValidateTimeout = 10 * time.Second

// buildWriteToSql compiles WriteToSql: an upsert or append sink on SQLite
// (the embedded default) or PostgreSQL. The table is checked against the
// rows at load time, so a column type conflict is a submit-time error; an
// upsert sink fed by panes that carry deltas is refused.
func buildWriteToSql(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	in := ins[0]
	if in.isReject {
		return nil, l.errf(t.typNode, "WriteToSql cannot write an error output directly; map it to fields first")
	}
	cfg := sqlsink.Config{RenamedColumns: renamedColumns(l, t, in), NotRenamedFrom: in.notRenames}
	var err error
	if n := t.config.Get("driver"); n != nil {
		if cfg.Driver, err = l.str(n, "WriteToSql driver"); err != nil {
			return nil, err
		}
	}
	dsnNode := t.config.Get("dsn")
	if dsnNode != nil {
		if cfg.DSN, err = l.str(dsnNode, "WriteToSql dsn"); err != nil {
			return nil, err
		}
	}
	if cfg.Table, _, err = l.requireStr(t.config, "table", "WriteToSql config"); err != nil {
		return nil, err
	}
	if n := t.config.Get("key"); n != nil {
		keys, nodes, err := l.strList(n, "WriteToSql key")
		if err != nil {
			return nil, err
		}
		for i, k := range keys {
			if in.schema.Index(k) < 0 {
				return nil, l.errf(nodes[i], "WriteToSql key field %q is not a field of its input (fields: %v)", k, in.schema.Names())
			}
		}
		cfg.Key = keys
	}
	if n := t.config.Get("mode"); n != nil {
		if cfg.Mode, err = l.str(n, "WriteToSql mode"); err != nil {
			return nil, err
		}
	}
	if n := t.config.Get("layout"); n != nil {
		if cfg.Layout, err = l.str(n, "WriteToSql layout"); err != nil {
			return nil, err
		}
		if lay := strings.ToLower(cfg.Layout); lay != sqlsink.LayoutTable && lay != sqlsink.LayoutStaged {
			return nil, l.errf(n, "WriteToSql layout %q is not supported: use table (the default) or staged", cfg.Layout)
		}
	}
	if n := t.config.Get("convert"); n != nil {
		if cfg.Convert, err = l.sqlConvert(n, in, cfg.Key, cfg.Layout); err != nil {
			return nil, err
		}
	}
	if job := l.opts.Job; job != nil && job.FromSnapshot && strings.EqualFold(cfg.Layout, sqlsink.LayoutStaged) {
		// A rollback converts back what the replaced job converted.
		for _, c := range job.PriorConverted[t.name] {
			if _, declared := cfg.Convert[c]; !declared && in.schema.Index(c) >= 0 && !slices.Contains(cfg.Key, c) {
				if cfg.Convert == nil {
					cfg.Convert = map[string]bool{}
				}
				cfg.Convert[c] = true
			}
		}
	}
	if n := t.config.Get("merge_interval"); n != nil {
		if strings.ToLower(cfg.Layout) != sqlsink.LayoutStaged {
			return nil, l.errf(n, "WriteToSql merge_interval applies to layout: staged only; add layout: staged or remove it")
		}
		d, err := l.duration(n, "WriteToSql merge_interval")
		if err != nil {
			return nil, err
		}
		switch {
		case d < 0:
			return nil, l.errf(n, "WriteToSql merge_interval %s is negative; use 0 to merge only on demand (weir tables merge)", n.Text)
		case d == 0:
			cfg.MergeInterval = -1 // only on demand
		default:
			cfg.MergeInterval = time.Duration(d) * time.Millisecond
		}
	}
	job := l.opts.Job
	if job != nil {
		if job.OnSQLMerge != nil {
			step := t.name
			cfg.OnMerge = func(rep sqlsink.MergeReport, err error) { job.OnSQLMerge(step, rep, err) }
		}
		cfg.DataDir = job.DataDir
		cfg.JobID = job.ID
		cfg.Generation = job.Generation
		cfg.Facade = job.SQLFacade
		cfg.FacadeHeld = job.SQLFacade && job.SQLFacadeHeld
		if job.Partition != "" {
			// A partition run stages its rows and publishes them at its end.
			digest := job.ManifestDigest
			if digest == "" {
				digest = l.manifestDigest
			}
			cfg.Stage = &sqlsink.Stage{Target: cfg.Table, JobName: job.Name, JobID: job.ID, Partition: job.Partition, ManifestDigest: digest, Shadow: job.Shadow}
			cfg.Table = sqlsink.StageTable(cfg.Table, job.Partition, job.ID)
		}
		// Epochs restart with every job, so the progress record is per job.
		cfg.SinkID = job.ID + "/" + t.name
		if err := l.sqlRekey(t, in, &cfg); err != nil {
			return nil, err
		}
	} else {
		// In-process runs commit once, at the end, without a progress record.
		cfg.DataDir = l.path("weir-data")
		cfg.SinkID = "local/" + t.name
	}
	if cfg.Driver == "" || cfg.Driver == sqlsink.DriverSQLite {
		if lower := strings.ToLower(cfg.DSN); strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://") {
			// SQLite would take the URL for a file name and write there.
			return nil, l.errf(dsnNode, "WriteToSql dsn is a PostgreSQL URL, but the driver is sqlite (the default): add driver: postgres")
		}
		if cfg.DSN != "" {
			if cfg.DSN, err = l.sqliteDSN(t, dsnNode, cfg.DSN); err != nil {
				return nil, err
			}
		}
	} else if cfg.Driver == sqlsink.DriverPostgres {
		// Before sink.Validate connects: a refused host is never tried,
		// a refused certificate file never read.
		if cfg.DSN, err = l.postgresDSN(dsnNode, cfg.DSN); err != nil {
			return nil, err
		}
	}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		// Keep the cause (sqlsink.ErrIdentifierTooLong has a code).
		e := l.errf(t.typNode, "%v", err).(*Error)
		e.Err = err
		return nil, e
	}
	if err := sqlsink.CheckAccumulation(cfg.Mode, in.rows.Windowing()); err != nil {
		return nil, l.errf(t.typNode, "%v", err)
	}
	sink, err := sqlsink.New(cfg, in.schema)
	if err != nil {
		return nil, l.errf(t.typNode, "%v", err)
	}
	if !l.opts.GraphOnly {
		ctx, cancel := context.WithTimeout(context.Background(), sqlValidateTimeout)
		defer cancel()
		if err := sink.Validate(ctx); err != nil {
			e := l.errf(t.typNode, "%v", err).(*Error)
			e.Err = err // keep the cause (sqlsink.ErrSchemaChange has a code)
			return nil, e
		}
	}
	identity := fmt.Sprintf("%s:%s", cfg.Driver, cfg.Table)
	l.writeWithErrors(t, in, sink, stepOpts(t, weir.WithSinkIdentity("sql", identity))...)
	return nil, nil
}

// renamedColumns returns the columns a WriteToSql renames in place (field
// name to old column name): the renames its input declares (a Combine's
// renamed_from), and the reverse of those the replaced job declared when
// the rows have the old name again (a rollback).
func renamedColumns(l *loader, t *transformSpec, in *coll) map[string]string {
	var out map[string]string
	add := func(field, from string) {
		if out == nil {
			out = map[string]string{}
		}
		out[field] = from
	}
	for nw, old := range in.renamed {
		add(nw, old)
	}
	if l.opts.Job != nil {
		for nw, old := range l.opts.Job.PriorRenamedColumns[t.name] {
			if in.schema.Index(old) >= 0 && in.schema.Index(nw) < 0 {
				add(old, nw)
			}
		}
	}
	return out
}

// sqlRekey sets cfg's re-key (sqlsink.Config.Rekey) when the Combine
// feeding the sink declares a re-key the replaced job's step did not, and
// its undo (Config.UndoRekey) when a job created from a snapshot no longer
// declares the replaced step's re-key (a rollback). The sink's key must be
// the Combine's group_by, so that a row's key is the re-keyed key.
func (l *loader) sqlRekey(t *transformSpec, in *coll, cfg *sqlsink.Config) error {
	job := l.opts.Job
	if job == nil || job.PriorKeyLayouts == nil || len(cfg.Key) == 0 {
		return nil
	}
	for _, r := range in.upstream {
		if prior, had := job.PriorKeyLayouts[r.step]; !had || prior != r.m.Layout {
			cfg.RekeyedUpstream = r.step
		}
	}
	if in.keyStep == "" {
		return nil
	}
	prior, had := job.PriorKeyLayouts[in.keyStep]
	current := ""
	if in.rekey != nil {
		current = in.rekey.m.Layout
	}
	if had && prior == current {
		return nil
	}
	if in.rekey == nil {
		// The replaced step declared a re-key this one does not: a
		// rollback from a snapshot puts the table's earlier keys back.
		cfg.UndoRekey = job.FromSnapshot && prior != ""
		return nil
	}
	m := in.rekey.m
	node := t.config.Get("key")
	if node == nil {
		node = t.typNode
	}
	order := make([]int, len(cfg.Key))
	for i, k := range cfg.Key {
		order[i] = slices.Index(m.Names, k)
	}
	refuse := func(format string, args ...any) error {
		e := l.errf(node, format, args...).(*Error)
		e.Err = sqlsink.ErrSchemaChange // SQL_SCHEMA_CHANGE_REFUSED
		return e
	}
	if len(cfg.Key) != len(m.Names) || slices.Contains(order, -1) {
		return refuse("WriteToSql key (%s) is not the group_by (%s) of %s, which re-keys its rows (migrations: rekey): a re-keyed table is keyed by the Combine's key; write to a new table",
			strings.Join(cfg.Key, ", "), strings.Join(m.Names, ", "), in.keyStep)
	}
	for i, f := range m.Old.Fields {
		if f.Type.Kind == row.KindTimestamp {
			return refuse("WriteToSql: %s re-keys its rows from %s, a timestamp: re-keying a table by a timestamp key is not supported; write to a new table", in.keyStep, m.From[i])
		}
	}
	cfg.Rekey = &sqlsink.Rekey{From: slices.Clone(m.From), Merge: in.rekey.merges, Step: in.keyStep,
		Map: func(old []any) ([]any, error) {
			vals, err := m.MapValues(old)
			if err != nil {
				return nil, err
			}
			out := make([]any, len(order))
			for i, j := range order {
				out[i] = vals[j]
			}
			return out, nil
		}}
	return nil
}

// sqlConvert reads WriteToSql's convert: the value columns whose type
// changes from the one the staged table's rows have so far, as a list
// (lossless conversions) or a map of {allow_lossy: BOOL} (lossy ones:
// sqlsink.Config.Convert). Each must be a value field of the input, not
// a key field, and the layout staged.
func (l *loader) sqlConvert(n *yamlnode.Node, in *coll, keys []string, layout string) (map[string]bool, error) {
	if !strings.EqualFold(layout, sqlsink.LayoutStaged) {
		return nil, l.errf(n, "WriteToSql convert applies to layout: staged only (the view serves the rows written before converted; a plain table would hold two types in one column): add layout: staged from the running version on, or write to a new table")
	}
	out := map[string]bool{}
	field := func(fn *yamlnode.Node) (string, error) {
		name, err := l.str(fn, "WriteToSql convert")
		if err != nil {
			return "", err
		}
		switch {
		case in.schema.Index(name) < 0:
			return "", l.errf(fn, "WriteToSql convert names %q, which is not a field of its input (fields: %v)", name, in.schema.Names())
		case slices.Contains(keys, name):
			return "", l.errf(fn, "WriteToSql convert names the key field %q: a key's type cannot change behind the view (the rows of one key would no longer meet); write to a new table", name)
		}
		if _, dup := out[name]; dup {
			return "", l.errf(fn, "WriteToSql convert names %q twice", name)
		}
		return name, nil
	}
	switch n.Kind {
	case yamlnode.Seq:
		for _, it := range n.Seq {
			name, err := field(it)
			if err != nil {
				return nil, err
			}
			out[name] = false
		}
	case yamlnode.Map:
		for i, k := range n.Keys {
			name, err := field(k)
			if err != nil {
				return nil, err
			}
			v := n.Vals[i]
			if v.Kind == yamlnode.Null {
				out[name] = false
				continue
			}
			if v.Kind != yamlnode.Map {
				return nil, l.errf(v, "WriteToSql convert of %s must be {allow_lossy: true|false} or {}, not %s", name, v.Kind)
			}
			if err := l.checkKeys(v, "WriteToSql convert of "+name, "allow_lossy"); err != nil {
				return nil, err
			}
			if lv := v.Get("allow_lossy"); lv != nil {
				if lv.Kind != yamlnode.Bool {
					return nil, l.errf(lv, "WriteToSql convert of %s: allow_lossy must be true or false, not %q", name, lv.Text)
				}
				out[name] = lv.B
			} else {
				out[name] = false
			}
		}
	default:
		return nil, l.errf(n, "WriteToSql convert must be [FIELD, ...] (lossless conversions) or {FIELD: {allow_lossy: true}} (lossy ones), not %s", n.Kind)
	}
	return out, nil
}
