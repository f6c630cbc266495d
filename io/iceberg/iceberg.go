// Package iceberg reads and writes Apache Iceberg tables under Beam's
// managed Iceberg transform names and config keys (ReadFromIceberg,
// WriteToIceberg), through Apache's own Go library for the format
// (github.com/apache/iceberg-go). The catalog is a SQL catalog (Iceberg's
// JDBC catalog schema: iceberg_tables and iceberg_namespace_properties) in
// a SQLite file or a PostgreSQL database, or a Hadoop catalog (the
// warehouse directory itself: each table's metadata versions and
// version-hint.text under NAMESPACE/TABLE/metadata); the warehouse, where
// table metadata and Parquet data files go, is a local directory.
//
// A read is a bounded source of the table's current snapshot, with
// Beam's keep and drop column selections and its SQL-like filter. A write
// appends rows, creating the namespace and the table (from the rows'
// schema) when missing. The sink is transactional: a worker's rows wait
// for its checkpoint's pre-commit, and Commit appends every worker's rows
// of an epoch as one Iceberg snapshot whose summary records the sink and
// the epoch (weir.sink-id, weir.epoch), so a commit repeated after a crash
// appends nothing twice. Without checkpoints (a bounded run in one process) Close
// appends the rows.
//
// It may import mtime, row, runner/contract, window, io/parquetcheck (a
// data file's structure is checked before Arrow's reader reads it),
// github.com/apache/iceberg-go, github.com/apache/arrow-go/v18,
// github.com/jackc/pgx/v5 (its database/sql driver, stdlib),
// modernc.org/sqlite and the standard library. It must not import runner
// (the executor).
package iceberg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/hadoop"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"
)

// ErrConfig marks a configuration weir cannot use.
var ErrConfig = errors.New("invalid Iceberg configuration")

// CatalogProperties are the catalog_properties keys weir reads: type (sql,
// or Java Iceberg's jdbc; or hadoop), uri (the SQL catalog's database),
// warehouse (a local directory) and the JDBC catalog's jdbc.user and
// jdbc.password.
var CatalogProperties = []string{"type", "uri", "warehouse", "jdbc.user", "jdbc.password"}

// Catalog is where a transform's table is: Beam's catalog_name and
// catalog_properties.
type Catalog struct {
	// Name is catalog_name: the catalog's key in the SQL catalog's tables
	// (default "default").
	Name string
	// Properties are catalog_properties (CatalogProperties).
	Properties map[string]string
	// BaseDir resolves relative SQLite and warehouse paths.
	BaseDir string
}

// Target is a parsed Catalog: the database, its driver and DSN, and what
// the server's policies check (DBPath, Host, Warehouse).
type Target struct {
	Name string
	// Hadoop says the catalog is the warehouse directory (type: hadoop):
	// no database, Dialect, Driver and DSN unset.
	Hadoop  bool
	Dialect sqlcat.SupportedDialect
	Driver  string
	DSN     string
	// DBPath is the SQLite file ("" for PostgreSQL).
	DBPath string
	// Host is the PostgreSQL host ("" for SQLite).
	Host string
	// Warehouse is the absolute local directory of new tables ("" when
	// not given: reads need none).
	Warehouse string
}

// Parse checks c and returns the catalog it means.
func (c Catalog) Parse() (Target, error) {
	p := c.Properties
	for k := range p {
		if !slices.Contains(CatalogProperties, k) {
			return Target{}, fmt.Errorf("%w: catalog_properties %q is not supported (weir reads %s)", ErrConfig, k, strings.Join(CatalogProperties, ", "))
		}
	}
	t := Target{Name: c.Name}
	if t.Name == "" {
		t.Name = "default"
	}
	switch typ := strings.ToLower(p["type"]); typ {
	case "sql", "jdbc":
	case "hadoop":
		return c.parseHadoop(t)
	case "":
		return Target{}, fmt.Errorf("%w: catalog_properties needs type: sql (a SQL catalog in SQLite or PostgreSQL) or hadoop (a warehouse directory)", ErrConfig)
	default:
		return Target{}, fmt.Errorf("%w: catalog type %q: weir has the sql (jdbc) catalog, in SQLite or PostgreSQL, and the hadoop catalog, in a local warehouse directory", ErrConfig, typ)
	}
	uri := strings.TrimSpace(p["uri"])
	if uri == "" {
		return Target{}, fmt.Errorf("%w: catalog_properties needs uri: a SQLite file (sqlite:///catalog.db) or a PostgreSQL URL", ErrConfig)
	}
	if err := t.parseURI(uri, p["jdbc.user"], p["jdbc.password"], c.BaseDir); err != nil {
		return Target{}, err
	}
	if w := strings.TrimSpace(p["warehouse"]); w != "" {
		dir, err := localPath(w, c.BaseDir)
		if err != nil {
			return Target{}, fmt.Errorf("%w: warehouse %q: %v", ErrConfig, w, err)
		}
		t.Warehouse = dir
	}
	return t, nil
}

// parseHadoop reads a hadoop catalog's properties: only warehouse, which
// it needs (the catalog is that directory), beside type.
func (c Catalog) parseHadoop(t Target) (Target, error) {
	for k := range c.Properties {
		if k != "type" && k != "warehouse" {
			return Target{}, fmt.Errorf("%w: catalog_properties %q: a hadoop catalog takes only warehouse", ErrConfig, k)
		}
	}
	w := strings.TrimSpace(c.Properties["warehouse"])
	if w == "" {
		return Target{}, fmt.Errorf("%w: a hadoop catalog needs warehouse: the local directory that holds its tables (file:///DIR or a path)", ErrConfig)
	}
	dir, err := localPath(w, c.BaseDir)
	if err != nil {
		return Target{}, fmt.Errorf("%w: warehouse %q: %v", ErrConfig, w, err)
	}
	t.Hadoop, t.Warehouse = true, dir
	return t, nil
}

// parseURI reads the catalog database's URI: SQLite as sqlite:///PATH,
// jdbc:sqlite:PATH, file:PATH or a path; PostgreSQL as postgresql://,
// postgres://, postgresql+DRIVER:// or jdbc:postgresql://.
func (t *Target) parseURI(uri, user, pass, base string) error {
	rest := strings.TrimPrefix(uri, "jdbc:")
	scheme, _, hasScheme := strings.Cut(rest, "://")
	scheme, _, _ = strings.Cut(scheme, "+")
	switch {
	case hasScheme && (scheme == "postgresql" || scheme == "postgres"):
		u, err := url.Parse(rest)
		if err != nil {
			return fmt.Errorf("%w: uri does not parse: %v", ErrConfig, err)
		}
		if u.Hostname() == "" {
			return fmt.Errorf("%w: uri %q names no host", ErrConfig, redact(u))
		}
		u.Scheme = "postgres"
		if user != "" {
			u.User = url.UserPassword(user, pass)
		}
		t.Dialect, t.Driver, t.DSN, t.Host = sqlcat.Postgres, "pgx", u.String(), u.Hostname()
		return nil
	case hasScheme && scheme != "sqlite":
		return fmt.Errorf("%w: uri %q: weir's SQL catalog is in SQLite (sqlite:///PATH) or PostgreSQL (postgresql://HOST/DB)", ErrConfig, scheme+"://...")
	}
	path := rest
	if hasScheme { // SQLAlchemy's sqlite:///relative and sqlite:////absolute
		path = strings.TrimPrefix(rest, "sqlite:///")
		if path == rest || path == "" || path == ":memory:" {
			return fmt.Errorf("%w: uri %q: give the SQLite catalog's file, as sqlite:///PATH", ErrConfig, uri)
		}
	}
	path = strings.TrimPrefix(path, "sqlite:")
	path, _, _ = strings.Cut(strings.TrimPrefix(path, "file:"), "?")
	if path == "" || path == ":memory:" {
		return fmt.Errorf("%w: uri %q: give the SQLite catalog's file (an in-memory catalog would vanish with its connection)", ErrConfig, uri)
	}
	path, err := absPath(path, base)
	if err != nil {
		return fmt.Errorf("%w: uri %q: %v", ErrConfig, uri, err)
	}
	t.Dialect, t.Driver, t.DBPath = sqlcat.SQLite, "sqlite", path
	t.DSN = "file:" + t.DBPath + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
	return nil
}

// redact drops a URL's password for messages.
func redact(u *url.URL) string {
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			c := *u
			c.User = url.UserPassword(u.User.Username(), "xxxxx")
			return c.String()
		}
	}
	return u.String()
}

// localPath turns a warehouse (file:///DIR, file:DIR or a path, relative
// to base) into an absolute directory; other schemes are refused.
func localPath(s, base string) (string, error) {
	if strings.HasPrefix(s, "file:") {
		u, err := url.Parse(s)
		if err != nil {
			return "", err
		}
		if u.Host != "" && u.Host != "localhost" {
			return "", fmt.Errorf("names host %s: the warehouse is a local directory", u.Host)
		}
		s = u.Path
		if s == "" {
			s = u.Opaque
		}
	} else if i := strings.Index(s, "://"); i > 0 {
		return "", fmt.Errorf("%s:// warehouses are not supported: the warehouse is a local directory (file:///DIR)", s[:i])
	}
	if s == "" {
		return "", errors.New("empty path")
	}
	return absPath(s, base)
}

// absPath resolves p against base (itself against the working directory).
func absPath(p, base string) (string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	return filepath.Abs(p)
}

// FilePath is the local path of a file URL in a table's metadata
// (file:///x, or a plain path), for the server's file policy; other
// schemes are returned with an error.
func FilePath(loc string) (string, error) {
	if !strings.Contains(loc, ":") || filepath.IsAbs(loc) {
		return filepath.Clean(loc), nil
	}
	return localPath(loc, "/")
}

// open opens t's catalog: a SQL catalog (connecting to its database and
// creating its two tables when missing) or a hadoop one. The returned
// function closes it.
func open(ctx context.Context, t Target) (catalog.Catalog, func() error, error) {
	props := iceberg.Properties{}
	if t.Warehouse != "" {
		props["warehouse"] = "file://" + filepath.ToSlash(t.Warehouse)
	}
	if t.Hadoop {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		cat, err := hadoop.NewCatalog(t.Name, props["warehouse"], props)
		if err != nil {
			return nil, nil, fmt.Errorf("opening the hadoop catalog in %s: %w", t.Warehouse, err)
		}
		return cat, cat.Close, nil
	}
	db, err := sql.Open(t.Driver, t.DSN)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the catalog database: %w", err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("connecting to the catalog database: %w", err)
	}
	cat, err := sqlcat.NewCatalog(t.Name, db, t.Dialect, props)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("opening the SQL catalog: %w", err)
	}
	return cat, func() error { return errors.Join(cat.Close(), db.Close()) }, nil
}

// Ident parses a table identifier: NAMESPACE.TABLE (dots separate nested
// namespaces); a table needs a namespace.
func Ident(name string) (table.Identifier, error) {
	id := catalog.ToIdentifier(strings.TrimSpace(name))
	if len(id) < 2 {
		return nil, fmt.Errorf("%w: table %q: give it with its namespace, as NAMESPACE.TABLE (e.g. db.events)", ErrConfig, name)
	}
	for _, p := range id {
		if p == "" {
			return nil, fmt.Errorf("%w: table %q has an empty name part", ErrConfig, name)
		}
	}
	return id, nil
}

// loadTable loads the table id of t's catalog; a missing one is
// reported with what to do.
func loadTable(ctx context.Context, t Target, id table.Identifier) (*table.Table, func(), error) {
	cat, closeCat, err := open(ctx, t)
	if err != nil {
		return nil, nil, err
	}
	tbl, err := cat.LoadTable(ctx, id)
	if err != nil {
		_ = closeCat()
		if errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace) {
			return nil, nil, fmt.Errorf("%w: table %s is not in catalog %s (write it with WriteToIceberg first)", ErrConfig, strings.Join(id, "."), t.Name)
		}
		return nil, nil, fmt.Errorf("loading table %s: %w", strings.Join(id, "."), err)
	}
	return tbl, func() { _ = closeCat() }, nil
}
