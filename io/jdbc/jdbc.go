// Package jdbc reads and writes PostgreSQL and MySQL (MariaDB) tables
// under Beam's JDBC transform names and config keys: ReadFromJdbc,
// ReadFromPostgres and ReadFromMySql run a query (or read a table) as a
// bounded source; WriteToJdbc, WriteToPostgres and WriteToMySql insert
// rows into an existing or new table. Beam's JDBC URL
// (jdbc:postgresql://HOST:PORT/DB?PARAMS, jdbc:mysql://...) with its
// username and password become a Go driver's DSN; Java-only keys
// (driver_class_name, driver_jars) are accepted and unused.
//
// The sink is transactional: a worker's rows wait for its checkpoint's
// pre-commit, and Commit inserts every worker's rows of an epoch and
// records the epoch in weir_jdbc_progress in one transaction, so a
// commit repeated after a crash inserts nothing twice. Without
// checkpoints (a bounded run in one process) Close inserts the rows.
//
// It may import mtime, row, runner/contract, window,
// github.com/jackc/pgx/v5 (its database/sql driver, stdlib),
// github.com/go-sql-driver/mysql and the standard library. It must not
// import runner (the executor).
package jdbc

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// Database kinds (Beam's jdbc_type).
const (
	Postgres = "postgres"
	MySQL    = "mysql"
)

// ErrConfig marks a configuration weir cannot use.
var ErrConfig = errors.New("invalid JDBC configuration")

// Conn is where a JDBC transform connects.
type Conn struct {
	// Type is Postgres or MySQL; empty takes it from the URL.
	Type string
	// URL is Beam's jdbc_url: jdbc:postgresql://HOST[:PORT]/DB[?PARAMS] or
	// jdbc:mysql://HOST[:PORT]/DB[?PARAMS] (jdbc:mariadb:// too).
	URL string
	// Username and Password override the URL's user and password.
	Username, Password string
	// ConnectionProperties are Beam's connection_properties
	// ("k1=v1;k2=v2"), added to the URL's parameters.
	ConnectionProperties string
	// InitSQL are statements every connection runs before anything else
	// (Beam's connection_init_sql).
	InitSQL []string
}

// Target is a parsed Conn: the driver, its DSN, and the host it reaches
// (for the server's host policy).
type Target struct {
	Type   string
	Driver string
	DSN    string
	Host   string
}

// Parse checks c and returns the Go driver and DSN it means.
func (c Conn) Parse() (Target, error) {
	raw := strings.TrimSpace(c.URL)
	if raw == "" {
		return Target{}, fmt.Errorf("%w: url (Beam's jdbc_url) is required, e.g. jdbc:postgresql://localhost:5432/db", ErrConfig)
	}
	rest, ok := strings.CutPrefix(raw, "jdbc:")
	if !ok {
		return Target{}, fmt.Errorf("%w: url %q is not a JDBC URL (jdbc:postgresql://... or jdbc:mysql://...)", ErrConfig, redact(raw))
	}
	scheme, _, _ := strings.Cut(rest, "://")
	typ := ""
	switch scheme {
	case "postgresql", "postgres":
		typ = Postgres
	case "mysql", "mariadb":
		typ = MySQL
	default:
		return Target{}, fmt.Errorf("%w: url %q: weir reads and writes jdbc:postgresql and jdbc:mysql (or jdbc:mariadb) URLs", ErrConfig, redact(raw))
	}
	if c.Type != "" && c.Type != typ {
		return Target{}, fmt.Errorf("%w: type %s does not match the url's %s", ErrConfig, c.Type, typ)
	}
	u, err := url.Parse(rest)
	if err != nil {
		return Target{}, fmt.Errorf("%w: url does not parse: %v", ErrConfig, err)
	}
	if u.Host == "" {
		return Target{}, fmt.Errorf("%w: url %q names no host", ErrConfig, redact(raw))
	}
	q := u.Query()
	user, pass := q.Get("user"), q.Get("password")
	q.Del("user")
	q.Del("password")
	if u.User != nil {
		user = u.User.Username()
		if p, ok := u.User.Password(); ok {
			pass = p
		}
	}
	if c.Username != "" {
		user = c.Username
	}
	if c.Password != "" {
		pass = c.Password
	}
	for _, kv := range strings.Split(c.ConnectionProperties, ";") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return Target{}, fmt.Errorf("%w: connection_properties %q: want k1=v1;k2=v2", ErrConfig, c.ConnectionProperties)
		}
		q.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	db := strings.TrimPrefix(u.Path, "/")
	t := Target{Type: typ, Host: u.Hostname()}
	switch typ {
	case Postgres:
		pu := url.URL{Scheme: "postgres", Host: u.Host, Path: "/" + db}
		if user != "" {
			pu.User = url.UserPassword(user, pass)
			if pass == "" {
				pu.User = url.User(user)
			}
		}
		pu.RawQuery = q.Encode()
		t.Driver, t.DSN = "pgx", pu.String()
	case MySQL:
		cfg := mysql.NewConfig()
		cfg.User, cfg.Passwd, cfg.Net, cfg.DBName = user, pass, "tcp", db
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "3306")
		}
		cfg.Addr = host
		cfg.ParseTime = true
		cfg.Loc = time.UTC
		for k, vs := range q {
			if len(vs) > 0 {
				if cfg.Params == nil {
					cfg.Params = map[string]string{}
				}
				cfg.Params[k] = vs[0]
			}
		}
		t.Driver, t.DSN = "mysql", cfg.FormatDSN()
	}
	return t, nil
}

// redact drops a URL's password for messages.
func redact(s string) string {
	if u, err := url.Parse(strings.TrimPrefix(s, "jdbc:")); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			return "jdbc:" + u.String()
		}
	}
	return s
}

// open connects to t; every connection the pool opens runs the init
// statements first (Beam's connection_init_sql), so a reconnect keeps
// them in force.
func open(t Target, init []string) (*sql.DB, error) {
	if len(init) == 0 {
		db, err := sql.Open(t.Driver, t.DSN)
		if err != nil {
			return nil, fmt.Errorf("connecting to %s: %w", t.Type, err)
		}
		return db, nil
	}
	probe, err := sql.Open(t.Driver, t.DSN)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", t.Type, err)
	}
	dc, ok := probe.Driver().(driver.DriverContext)
	probe.Close()
	if !ok {
		return nil, fmt.Errorf("connecting to %s: the driver cannot run connection_init_sql", t.Type)
	}
	base, err := dc.OpenConnector(t.DSN)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", t.Type, err)
	}
	return sql.OpenDB(initConnector{base: base, init: init}), nil
}

// initConnector runs init on every connection base opens.
type initConnector struct {
	base driver.Connector
	init []string
}

// Connect implements driver.Connector.
func (c initConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	ex, ok := conn.(driver.ExecerContext)
	if !ok {
		conn.Close()
		return nil, errors.New("the driver's connections cannot run connection_init_sql")
	}
	for _, s := range c.init {
		if _, err := ex.ExecContext(ctx, s, nil); err != nil {
			conn.Close()
			return nil, fmt.Errorf("connection_init_sql %q: %w", s, err)
		}
	}
	return conn, nil
}

// Driver implements driver.Connector.
func (c initConnector) Driver() driver.Driver { return c.base.Driver() }

// quote quotes an identifier (a table name, possibly schema-qualified,
// or a column) for t's database.
func quote(typ, name string) string {
	q := `"`
	if typ == MySQL {
		q = "`"
	}
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = q + strings.ReplaceAll(p, q, q+q) + q
	}
	return strings.Join(parts, ".")
}
