package sqlsink

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// PublicPostgresURL returns PostgreSQL DSN dsn (URL or keyword/value
// form) as a postgres:// URL a server may show its clients: the same
// hosts, port, database, user and settings, without the password and
// without the parameters that name the server's files (PostgresFileKeys)
// or secrets (sslpassword). A client that connects with it brings its
// own password, as libpq clients do (PGPASSWORD, ~/.pgpass).
func PublicPostgresURL(dsn string) (string, error) {
	isURL := strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
	if isURL {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("%w: the PostgreSQL dsn does not parse: %w", ErrConfig, err)
		}
		u.Scheme = "postgres"
		if u.User != nil {
			u.User = url.User(u.User.Username())
		}
		q := u.Query()
		for k := range q {
			if secretPostgresKey(k) {
				q.Del(k)
			}
		}
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	settings, err := keywordValueSettings(dsn)
	if err != nil {
		return "", fmt.Errorf("%w: the PostgreSQL dsn does not parse: %w", ErrConfig, err)
	}
	u := &url.URL{Scheme: "postgres"}
	q := url.Values{}
	var host, port, user string
	for _, kv := range settings {
		switch k, v := kv[0], kv[1]; {
		case k == "host":
			host = v
		case k == "port":
			port = v
		case k == "user":
			user = v
		case k == "dbname":
			u.Path = "/" + v
		case secretPostgresKey(k):
		default:
			q.Set(k, v)
		}
	}
	if user != "" {
		u.User = url.User(user)
	}
	switch {
	case strings.HasPrefix(host, "/"):
		// A Unix socket directory: pgx takes it as the host parameter.
		q.Set("host", host)
		if port != "" {
			q.Set("port", port)
		}
	case port != "":
		u.Host = net.JoinHostPort(host, port)
	default:
		u.Host = host
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// secretPostgresKey says whether a DSN parameter is a secret or names a
// file of the server's.
func secretPostgresKey(k string) bool {
	return k == "password" || k == "sslpassword" || isFileKey(k)
}
