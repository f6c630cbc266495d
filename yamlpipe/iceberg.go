package yamlpipe

import (
	"context"
	"errors"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/io/iceberg"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// Beam's managed Iceberg transforms (its standard_io.yaml):
// ReadFromIceberg and WriteToIceberg with Beam's config keys, on a SQL
// catalog in SQLite or PostgreSQL with a local warehouse, or a hadoop
// catalog in a local warehouse (package io/iceberg). The catalog's SQLite file and the warehouse must be inside
// the server's file roots, a PostgreSQL catalog's host one it allows.

// icebergKeys are the config keys both Iceberg transforms accept.
var icebergKeys = []string{"table", "catalog_name", "catalog_properties", "config_properties", "keep", "drop"}

// icebergReadKeys and icebergWriteKeys are each transform's keys.
var (
	icebergReadKeys  = append([]string{"filter"}, icebergKeys...)
	icebergWriteKeys = append([]string{"only", "partition_fields", "table_properties", "triggering_frequency_seconds"}, icebergKeys...)
)

// icebergTimeout bounds a submission's look at the catalog.
const icebergTimeout = 10 * time.Second

// strMap reads the mapping of strings at key of m (nil when absent).
func (l *loader) strMap(m *yamlnode.Node, key, what string) (map[string]string, *yamlnode.Node, error) {
	n := m.Get(key)
	if n == nil || n.Kind == yamlnode.Null {
		return nil, nil, nil
	}
	if n.Kind != yamlnode.Map {
		return nil, nil, l.errf(n, "%s %s must be a mapping, not %s", what, key, n.Kind)
	}
	out := make(map[string]string, len(n.Keys))
	for i, k := range n.Keys {
		v, err := l.str(n.Vals[i], what+" "+key+"."+k.Text)
		if err != nil {
			return nil, nil, err
		}
		out[k.Text] = v
	}
	return out, n, nil
}

// icebergTarget reads t's table and catalog and checks the catalog's
// database and warehouse against the server's policies.
func (l *loader) icebergTarget(t *transformSpec) (iceberg.Target, string, *yamlnode.Node, error) {
	var tg iceberg.Target
	table, tn, err := l.requireStr(t.config, "table", t.typ+" config")
	if err != nil {
		return tg, "", nil, err
	}
	if _, err := iceberg.Ident(table); err != nil {
		return tg, "", nil, l.wrapf(tn, err, "%s table", t.typ)
	}
	name, _, err := l.optStr(t.config, "catalog_name")
	if err != nil {
		return tg, "", nil, err
	}
	props, pn, err := l.strMap(t.config, "catalog_properties", t.typ)
	if err != nil {
		return tg, "", nil, err
	}
	if pn == nil {
		return tg, "", nil, l.errf(t.typNode, "%s needs config.catalog_properties (type: sql, uri: the catalog database, warehouse: a local directory; or type: hadoop, warehouse: a local directory)", t.typ)
	}
	if err := l.checkKeys(pn, t.typ+" catalog_properties", iceberg.CatalogProperties...); err != nil {
		return tg, "", nil, err
	}
	if cp, cn, err := l.strMap(t.config, "config_properties", t.typ); err != nil || len(cp) > 0 {
		if err == nil {
			err = l.errf(cn, "%s config_properties are Hadoop settings, which weir has no use for: remove them", t.typ)
		}
		return tg, "", nil, err
	}
	if tg, err = (iceberg.Catalog{Name: name, Properties: props, BaseDir: l.opts.BaseDir}).Parse(); err != nil {
		return tg, "", nil, l.wrapf(pn, err, "%s catalog_properties", t.typ)
	}
	at := func(key string) *yamlnode.Node {
		if n := pn.Get(key); n != nil {
			return n
		}
		return pn
	}
	for _, c := range []struct{ path, key string }{{tg.DBPath, "uri"}, {tg.Warehouse, "warehouse"}} {
		if err := l.files().Check(c.path); c.path != "" && err != nil {
			return tg, "", nil, l.wrapf(at(c.key), err, "%s catalog %s", t.typ, c.key)
		}
	}
	if tg.Host != "" {
		if err := l.sqlHosts().CheckHost(tg.Host); err != nil {
			return tg, "", nil, l.wrapf(at("uri"), err, "%s catalog uri", t.typ)
		}
	}
	return tg, table, tn, nil
}

// buildReadFromIceberg compiles ReadFromIceberg: a bounded source of the
// table's current snapshot, typed by its columns (after keep or drop) at
// load.
func buildReadFromIceberg(l *loader, t *transformSpec, _ []*coll) (*coll, error) {
	tg, table, tn, err := l.icebergTarget(t)
	if err != nil {
		return nil, err
	}
	filter, fn, err := l.optStr(t.config, "filter")
	if err != nil {
		return nil, err
	}
	if filter != "" {
		if _, err := iceberg.ParseFilter(filter); err != nil {
			return nil, l.wrapf(fn, err, "%s", t.typ)
		}
	}
	cfg := iceberg.ReadConfig{Target: tg, Table: table, Check: l.files().Check, Filter: filter}
	if cfg.Keep, _, err = l.strList(t.config.Get("keep"), t.typ+" keep"); err != nil {
		return nil, err
	}
	if cfg.Drop, _, err = l.strList(t.config.Get("drop"), t.typ+" drop"); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), icebergTimeout)
	defer cancel()
	schema, err := iceberg.Describe(ctx, cfg)
	if err != nil {
		at := tn
		if fe := (*iceberg.FilterError)(nil); errors.As(err, &fe) {
			at = fn
		}
		return nil, l.wrapf(at, err, "%s", t.typ)
	}
	src := iceberg.NewSource(cfg, schema)
	opts := stepOpts(t, weir.WithCoder(schema.Coder()), weir.WithSourceIdentity("iceberg", tg.Name+"/"+table, true))
	return rowsColl(schema, weir.Read[*rowT](l.root, t.name, src, true, opts...)), nil
}

// buildWriteToIceberg compiles WriteToIceberg: rows appended to the table
// (created when missing), one snapshot per checkpoint (package
// io/iceberg).
func buildWriteToIceberg(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	in := ins[0]
	if in.isReject {
		return nil, l.errf(t.typNode, "%s cannot write an error output directly; map it to fields first", t.typ)
	}
	tg, table, _, err := l.icebergTarget(t)
	if err != nil {
		return nil, err
	}
	if on := t.config.Get("only"); on != nil {
		return nil, l.errf(on, "%s only (writing one nested record field) is not supported: map the record's fields to the top level first", t.typ)
	}
	if fn := t.config.Get("triggering_frequency_seconds"); fn != nil {
		// Snapshots follow the job's checkpoints (the server's interval).
		if v, err := l.integer(fn, t.typ+" triggering_frequency_seconds"); err != nil {
			return nil, err
		} else if v <= 0 {
			return nil, l.errf(fn, "%s triggering_frequency_seconds must be positive", t.typ)
		}
	}
	cfg := iceberg.SinkConfig{Target: tg, Table: table, Check: l.files().Check}
	if cfg.Keep, _, err = l.strList(t.config.Get("keep"), t.typ+" keep"); err != nil {
		return nil, err
	}
	if cfg.Drop, _, err = l.strList(t.config.Get("drop"), t.typ+" drop"); err != nil {
		return nil, err
	}
	if cfg.PartitionFields, _, err = l.strList(t.config.Get("partition_fields"), t.typ+" partition_fields"); err != nil {
		return nil, err
	}
	if cfg.Properties, _, err = l.strMap(t.config, "table_properties", t.typ); err != nil {
		return nil, err
	}
	if job := l.opts.Job; job != nil && job.ID != "" {
		// Epochs restart with every job: the snapshots record the job's.
		cfg.SinkID = job.ID + "/" + t.name
	}
	sink, err := iceberg.NewSink(cfg, in.schema)
	if err != nil {
		return nil, l.errf(t.typNode, "%s: %v", t.typ, err)
	}
	if !l.opts.GraphOnly {
		ctx, cancel := context.WithTimeout(context.Background(), icebergTimeout)
		defer cancel()
		if err := sink.Validate(ctx); err != nil {
			return nil, l.errf(t.typNode, "%s: %v", t.typ, err)
		}
	}
	l.writeWithErrors(t, in, sink, stepOpts(t, weir.WithSinkIdentity("iceberg", tg.Name+"/"+table))...)
	return nil, nil
}
