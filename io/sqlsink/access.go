package sqlsink

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
)

// This file holds what a server checks of a submitted WriteToSql before the
// sink opens anything: which network hosts a PostgreSQL DSN may name
// (HostPolicy), and where a SQLite DSN's file is (SQLitePath), so the
// caller can confine it to its file roots.

// ErrHostNotAllowed marks a PostgreSQL DSN naming a host outside the
// server's --allowed-sql-hosts (HostError). Callers match it with
// errors.Is; the job service answers it as SQL_HOST_NOT_ALLOWED.
var ErrHostNotAllowed = errors.New("sql host not allowed")

// DefaultAllowedHosts are the hosts a PostgreSQL DSN may name when a server
// is given none: the loopback addresses and "localhost".
var DefaultAllowedHosts = []string{"localhost", "127.0.0.0/8", "::1"}

// HostPolicy is the set of database hosts a PostgreSQL DSN may name: host
// names (compared case-insensitively, never resolved: the check makes no
// DNS query and no connection), IP addresses and CIDR prefixes. A Unix
// socket directory (a host starting with "/") is allowed when "localhost"
// is. A nil *HostPolicy allows every host.
type HostPolicy struct {
	names    map[string]bool
	prefixes []netip.Prefix
	shown    []string
}

// NewHostPolicy parses hosts: each a host name, an IP address or a CIDR
// prefix ("10.0.0.0/8").
func NewHostPolicy(hosts []string) (*HostPolicy, error) {
	p := &HostPolicy{names: map[string]bool{}}
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		p.shown = append(p.shown, h)
		if pfx, err := netip.ParsePrefix(h); err == nil {
			p.prefixes = append(p.prefixes, pfx.Masked())
			continue
		}
		if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
			p.prefixes = append(p.prefixes, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		if strings.ContainsAny(h, "/:@ ") {
			return nil, fmt.Errorf("allowed SQL host %q: want a host name, an IP address or a CIDR prefix (no port)", h)
		}
		p.names[strings.ToLower(strings.TrimSuffix(h, "."))] = true
	}
	return p, nil
}

// Hosts returns the policy's entries as given.
func (p *HostPolicy) Hosts() []string {
	if p == nil {
		return nil
	}
	return append([]string(nil), p.shown...)
}

// HostError is a DSN host a policy refuses. It matches ErrHostNotAllowed.
type HostError struct {
	Host    string
	Allowed []string
}

// Error names the host, the allowed hosts and the flag that sets them.
func (e *HostError) Error() string {
	allowed := "none"
	if len(e.Allowed) > 0 {
		allowed = strings.Join(e.Allowed, ", ")
	}
	return fmt.Sprintf("database host %q is not one this server lets pipelines connect to (allowed: %s); the server's --allowed-sql-hosts flag sets them (weir made no connection)", e.Host, allowed)
}

// Is makes errors.Is(err, ErrHostNotAllowed) hold.
func (e *HostError) Is(target error) bool { return target == ErrHostNotAllowed }

// allows says whether host (a name, an address or a socket directory) is in p.
func (p *HostPolicy) allows(host string) bool {
	if strings.HasPrefix(host, "/") {
		return p.names["localhost"]
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		a = a.Unmap()
		for _, pfx := range p.prefixes {
			if pfx.Contains(a) {
				return true
			}
		}
		return false
	}
	return p.names[strings.ToLower(strings.TrimSuffix(host, "."))]
}

// CheckHost refuses host (a name or an address, without a port) unless p
// allows it (a HostError); a nil p allows every host.
func (p *HostPolicy) CheckHost(host string) error {
	if p == nil || p.allows(host) {
		return nil
	}
	return &HostError{Host: host, Allowed: p.Hosts()}
}

// CheckDSN parses a PostgreSQL DSN (URL or keyword form, with the PG*
// environment variables' defaults, as the sink will connect) and returns a
// *HostError for the first host (fallbacks included) outside p. It opens
// no connection and resolves no name. A nil *HostPolicy allows every host.
func (p *HostPolicy) CheckDSN(dsn string) error {
	if p == nil {
		return nil
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("%w: the PostgreSQL dsn does not parse: %w", ErrConfig, err)
	}
	hosts := []string{cfg.Host}
	for _, fb := range cfg.Fallbacks {
		hosts = append(hosts, fb.Host)
	}
	for _, h := range hosts {
		if !p.allows(h) {
			return &HostError{Host: h, Allowed: p.Hosts()}
		}
	}
	return nil
}

// SQLitePath returns the file a SQLite DSN opens, resolved against base
// when relative, and the DSN rewritten to name that absolute file (a
// "file:" URI keeps its query parameters). memory is set for in-memory
// databases (":memory:", mode=memory), which have no file. Percent escapes
// of a URI's path are decoded, as SQLite decodes them.
func SQLitePath(dsn, base string) (path, resolved string, memory bool, err error) {
	if dsn == ":memory:" {
		return "", dsn, true, nil
	}
	if !strings.HasPrefix(dsn, "file:") {
		p := dsn
		if !filepath.IsAbs(p) && base != "" {
			p = filepath.Join(base, p)
		}
		return p, p, false, nil
	}
	rest := strings.TrimPrefix(dsn, "file:")
	query := ""
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest, query = rest[:i], rest[i+1:]
	}
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest = rest[:i]
	}
	if strings.HasPrefix(rest, "//") {
		// file://HOST/path: SQLite accepts only an empty host or localhost.
		hostEnd := strings.IndexByte(rest[2:], '/')
		if hostEnd < 0 {
			return "", "", false, fmt.Errorf("%w: SQLite dsn %q has no path", ErrConfig, dsn)
		}
		host := rest[2 : 2+hostEnd]
		if host != "" && host != "localhost" {
			return "", "", false, fmt.Errorf("%w: SQLite dsn %q names host %q; only a local file (file:///path) can be opened", ErrConfig, dsn, host)
		}
		rest = rest[2+hostEnd:]
	}
	p, err := url.PathUnescape(rest)
	if err != nil {
		return "", "", false, fmt.Errorf("%w: SQLite dsn %q: %w", ErrConfig, dsn, err)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", "", false, fmt.Errorf("%w: SQLite dsn %q: %w", ErrConfig, dsn, err)
	}
	if q.Get("mode") == "memory" || p == ":memory:" {
		return "", dsn, true, nil
	}
	if q.Has("vfs") {
		return "", "", false, fmt.Errorf("%w: SQLite dsn %q: the vfs parameter is not supported", ErrConfig, dsn)
	}
	if p == "" {
		return "", "", false, fmt.Errorf("%w: SQLite dsn %q has no path", ErrConfig, dsn)
	}
	if !filepath.IsAbs(p) && base != "" {
		p = filepath.Join(base, p)
	}
	resolved = "file:" + (&url.URL{Path: p}).EscapedPath()
	if query != "" {
		resolved += "?" + query
	}
	return p, resolved, false, nil
}
