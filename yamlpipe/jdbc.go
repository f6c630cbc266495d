package yamlpipe

import (
	"context"
	"fmt"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/io/jdbc"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// Beam's JDBC family (its standard_io.yaml): ReadFromJdbc/WriteToJdbc and
// the PostgreSQL and MySQL names, with Beam's config keys. The
// connection's host must be one the server allows (--allowed-sql-hosts),
// as for WriteToSql.

// jdbcKeys are the config keys every JDBC transform accepts.
var jdbcKeys = []string{"url", "username", "password", "table", "type", "driver_class_name", "driver_jars",
	"connection_properties", "connection_init_sql"}

// jdbcTimeout bounds a submission's look at the database.
const jdbcTimeout = 10 * time.Second

// jdbcTypeOf is the database a transform type implies ("" for the
// generic Jdbc names, which take it from the URL or type).
func jdbcTypeOf(typ string) string {
	switch typ {
	case "ReadFromPostgres", "WriteToPostgres":
		return jdbc.Postgres
	case "ReadFromMySql", "WriteToMySql":
		return jdbc.MySQL
	}
	return ""
}

// jdbcTarget reads the connection config of t.
func (l *loader) jdbcTarget(t *transformSpec) (jdbc.Target, []string, error) {
	c := jdbc.Conn{Type: jdbcTypeOf(t.typ)}
	var err error
	var urlNode *yamlnode.Node
	if c.URL, urlNode, err = l.requireStr(t.config, "url", t.typ+" config"); err != nil {
		return jdbc.Target{}, nil, err
	}
	if c.Username, _, err = l.optStr(t.config, "username"); err != nil {
		return jdbc.Target{}, nil, err
	}
	if c.Password, _, err = l.optStr(t.config, "password"); err != nil {
		return jdbc.Target{}, nil, err
	}
	if c.ConnectionProperties, _, err = l.optStr(t.config, "connection_properties"); err != nil {
		return jdbc.Target{}, nil, err
	}
	typ, tn, err := l.optStr(t.config, "type")
	if err != nil {
		return jdbc.Target{}, nil, err
	}
	switch {
	case typ == "":
	case typ != jdbc.Postgres && typ != jdbc.MySQL:
		return jdbc.Target{}, nil, l.errf(tn, "%s type %q: weir reads and writes postgres and mysql", t.typ, typ)
	case c.Type != "" && typ != c.Type:
		return jdbc.Target{}, nil, l.errf(tn, "%s type %q: %s is %s", t.typ, typ, t.typ, c.Type)
	default:
		c.Type = typ
	}
	if n := t.config.Get("connection_init_sql"); n != nil {
		if c.InitSQL, _, err = l.strList(n, t.typ+" connection_init_sql"); err != nil {
			return jdbc.Target{}, nil, err
		}
	}
	target, err := c.Parse()
	if err != nil {
		return jdbc.Target{}, nil, l.wrapf(urlNode, err, "%s url", t.typ)
	}
	if err := l.sqlHosts().CheckHost(target.Host); err != nil {
		return jdbc.Target{}, nil, l.wrapf(urlNode, err, "%s url", t.typ)
	}
	return target, c.InitSQL, nil
}

// buildReadFromJdbc compiles ReadFromJdbc, ReadFromPostgres and
// ReadFromMySql: a bounded source of the query's (or the table's) rows,
// typed by the columns the database reports for it at load.
func buildReadFromJdbc(l *loader, t *transformSpec, _ []*coll) (*coll, error) {
	target, init, err := l.jdbcTarget(t)
	if err != nil {
		return nil, err
	}
	table, tn, err := l.optStr(t.config, "table")
	if err != nil {
		return nil, err
	}
	query, qn, err := l.optStr(t.config, "query")
	if err != nil {
		return nil, err
	}
	switch {
	case table == "" && query == "":
		return nil, l.errf(t.typNode, "%s needs config.table or config.query", t.typ)
	case table != "" && query != "":
		return nil, l.errf(qn, "%s takes config.table or config.query, not both", t.typ)
	}
	q := jdbc.Query(target.Type, table, query)
	ctx, cancel := context.WithTimeout(context.Background(), jdbcTimeout)
	defer cancel()
	schema, err := jdbc.Describe(ctx, target, init, q)
	if err != nil {
		at := qn
		if at == nil {
			at = tn
		}
		return nil, l.wrapf(at, err, "%s", t.typ)
	}
	what := table
	if what == "" {
		what = "query"
	}
	src := jdbc.NewSource(target, init, q, schema)
	opts := stepOpts(t, weir.WithCoder(schema.Coder()), weir.WithSourceIdentity("jdbc", fmt.Sprintf("%s:%s/%s", target.Type, target.Host, what), true))
	out := weir.Read[*rowT](l.root, t.name, src, true, opts...)
	return rowsColl(schema, out), nil
}

// buildWriteToJdbc compiles WriteToJdbc, WriteToPostgres and
// WriteToMySql: rows inserted into config.table (created when missing),
// once per checkpoint (package io/jdbc).
func buildWriteToJdbc(l *loader, t *transformSpec, ins []*coll) (*coll, error) {
	in := ins[0]
	if in.isReject {
		return nil, l.errf(t.typNode, "%s cannot write an error output directly; map it to fields first", t.typ)
	}
	target, init, err := l.jdbcTarget(t)
	if err != nil {
		return nil, err
	}
	table, _, err := l.requireStr(t.config, "table", t.typ+" config")
	if err != nil {
		return nil, err
	}
	cfg := jdbc.SinkConfig{Target: target, Init: init, Table: table}
	if job := l.opts.Job; job != nil && job.ID != "" {
		// Epochs restart with every job: the progress record is per job.
		cfg.SinkID = job.ID + "/" + t.name
	}
	sink, err := jdbc.NewSink(cfg, in.schema)
	if err != nil {
		return nil, l.errf(t.typNode, "%s: %v", t.typ, err)
	}
	if !l.opts.GraphOnly {
		ctx, cancel := context.WithTimeout(context.Background(), jdbcTimeout)
		defer cancel()
		if err := sink.Validate(ctx); err != nil {
			return nil, l.errf(t.typNode, "%s: %v", t.typ, err)
		}
	}
	l.writeWithErrors(t, in, sink, stepOpts(t, weir.WithSinkIdentity("jdbc", fmt.Sprintf("%s:%s/%s", target.Type, target.Host, table)))...)
	return nil, nil
}
