package yamlpipe

import (
	"io/fs"
	"regexp"
	"strconv"

	"github.com/weir-dev/weir/io/files"
	"github.com/weir-dev/weir/io/sqlsink"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/yamlpipe/jinja"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// This file holds what a server lets a submitted pipeline touch (Access)
// and the file sinks' choice between one file (bounded runs) and part
// files per checkpoint epoch (streaming jobs).

// Errors of the access checks, matched with errors.Is (the job service
// answers them as PATH_NOT_ALLOWED, SQL_HOST_NOT_ALLOWED and
// OUTPUT_EXISTS).
var (
	// ErrPathNotAllowed: a file path (a source, a sink, a SQLite DSN) leads
	// outside Access.Files.
	ErrPathNotAllowed = files.ErrPathNotAllowed
	// ErrSQLHostNotAllowed: a PostgreSQL DSN names a host outside
	// Access.SQLHosts.
	ErrSQLHostNotAllowed = sqlsink.ErrHostNotAllowed
	// ErrOutputExists: a file sink's path holds output its job may not
	// touch (files.CheckOutput).
	ErrOutputExists = files.ErrOutputExists
	// ErrIdentifierTooLong: a SQL sink's table name (or a name made from
	// it) is longer than its database takes (sqlsink.ErrIdentifierTooLong).
	ErrIdentifierTooLong = sqlsink.ErrIdentifierTooLong
	// ErrSchemaChange: a SQL sink's row schema changed in a way
	// weir does not apply to its table in place (sqlsink.ErrSchemaChange).
	ErrSchemaChange = sqlsink.ErrSchemaChange
	// ErrBudgetExceeded: loading the pipeline would pass one of the
	// loader's budgets (a Jinja render's, or the alias_bytes of YAML
	// aliases); the job service answers PIPELINE_BUDGET_EXCEEDED.
	ErrBudgetExceeded = jinja.ErrBudgetExceeded
)

// Access is what a server lets the pipelines it is sent touch. A nil
// *Access (an in-process run, a check) has the user's full rights, and
// nil fields allow everything of their kind.
type Access struct {
	// Files confines every file path: sources, sinks, SQLite DSNs.
	Files *files.Roots
	// SQLHosts confines the hosts of PostgreSQL DSNs; checked before any
	// connection.
	SQLHosts *sqlsink.HostPolicy
	// Jinja renders the templates a server is sent in a child process,
	// within the render budgets' memory and time; nil: in the server's
	// process, where only the range, output and recursion budgets hold.
	Jinja *JinjaSandbox
}

// JinjaSandbox returns the sandbox of a's renders; nil for a nil a.
func (a *Access) JinjaSandbox() *JinjaSandbox {
	if a == nil {
		return nil
	}
	return a.Jinja
}

func (l *loader) files() *files.Roots {
	if l.opts.Access == nil {
		return nil
	}
	return l.opts.Access.Files
}

func (l *loader) sqlHosts() *sqlsink.HostPolicy {
	if l.opts.Access == nil {
		return nil
	}
	return l.opts.Access.SQLHosts
}

// remoteURL finds a URL scheme (gs://, s3://, hdfs://...) at the start of a path.
var remoteURL = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*://`)

// checkPath checks a file path (a glob for sources) against the roots; a
// remote URL (Beam's gs:// paths) is refused with what to do.
func (l *loader) checkPath(t *transformSpec, n *yamlnode.Node, p string, pattern bool) error {
	if n != nil && n.Kind == yamlnode.String {
		if m := remoteURL.FindString(n.Text); m != "" {
			return l.errf(n, "%s paths are not supported: weir reads and writes local files (copy the data and give its local path)", m)
		}
	}
	check := l.files().Check
	if pattern {
		check = l.files().CheckPattern
	}
	if err := check(p); err != nil {
		if n == nil {
			n = t.typNode
		}
		return l.wrapf(n, err, "%s path", t.typ)
	}
	return nil
}

// fileMode reads a file sink's optional file_mode: an octal string
// ("0640"), at least owner read and write; 0 when absent.
func (l *loader) fileMode(t *transformSpec) (fs.FileMode, error) {
	s, n, err := l.optStr(t.config, "file_mode")
	if err != nil || n == nil {
		return 0, err
	}
	v, perr := strconv.ParseUint(s, 8, 32)
	if perr != nil || v > 0o777 || v&0o600 != 0o600 {
		return 0, l.errf(n, "file_mode %q: want an octal mode string such as \"0640\" or \"0600\", with owner read and write", s)
	}
	return fs.FileMode(v), nil
}

// rolling reads a streaming file sink's roll_size (bytes, or with a unit:
// 64KiB, 128MiB, 1GiB, 100MB) and roll_interval (a duration).
func (l *loader) rolling(t *transformSpec) (files.Rolling, error) {
	var r files.Rolling
	if n := t.config.Get("roll_size"); n != nil {
		size, err := files.ParseByteSize(n.Text)
		if n.Kind != yamlnode.String && n.Kind != yamlnode.Int || err != nil || size <= 0 {
			return r, l.errf(n, "roll_size %q: want a positive size in bytes, or with a unit as 64KiB, 128MiB, 1GiB or 100MB", n.Text)
		}
		r.Size = size
	}
	d, set, err := l.optDuration(t.config, "roll_interval")
	if err != nil {
		return r, err
	}
	if set {
		if d <= 0 {
			return r, l.errf(t.config.Get("roll_interval"), "roll_interval must be a positive duration such as 15m")
		}
		r.Interval = d
	}
	return r, nil
}

// fileSink builds the sink of WriteToJson/WriteToCsv for input in: in a
// job whose input is unbounded, part files per checkpoint epoch (the path
// checked against the outputs already there); otherwise one file.
func (l *loader) fileSink(t *transformSpec, pn *yamlnode.Node, in *coll, cfg files.SinkConfig) (contract.Sink, error) {
	mode, err := l.fileMode(t)
	if err != nil {
		return nil, err
	}
	cfg.Mode, cfg.Roots = mode, l.files()
	job := l.opts.Job
	if job == nil {
		return files.NewFileSink(cfg), nil
	}
	cfg.Owner = &files.Owner{JobName: job.Name, JobID: job.ID, Generation: job.Generation}
	layout := files.LayoutFile
	if !l.bounded(in) {
		layout = files.LayoutParts
	}
	if job.Partition != "" && layout == files.LayoutFile {
		// A partition run stages a version of its partition and publishes
		// it at its end (io/files, publish.go).
		if l.opts.CheckOutputs {
			if err := files.CheckPartitionOutput(cfg.Path, *cfg.Owner, job.Shadow); err != nil {
				return nil, l.wrapf(pn, err, "%s path", t.typ)
			}
		}
		digest := job.ManifestDigest
		if digest == "" {
			digest = l.manifestDigest
		}
		s, err := files.NewStagedSink(cfg, files.Stage{JobName: job.Name, JobID: job.ID, Partition: job.Partition, ManifestDigest: digest, Shadow: job.Shadow})
		if err != nil {
			return nil, l.wrapf(pn, err, "%s", t.typ)
		}
		return s, nil
	}
	if l.opts.CheckOutputs {
		// A job service's load: the path must be free for this job.
		if err := files.CheckOutput(cfg.Path, *cfg.Owner, layout); err != nil {
			return nil, l.wrapf(pn, err, "%s path", t.typ)
		}
	}
	if layout == files.LayoutFile {
		return files.NewFileSink(cfg), nil
	}
	s, err := files.NewEpochSink(cfg)
	if err != nil {
		return nil, l.wrapf(pn, err, "%s", t.typ)
	}
	return s, nil
}

// bounded says whether collection c is bounded.
func (l *loader) bounded(c *coll) bool {
	id := c.rows.ID()
	if c.isReject {
		id = c.rejects.ID()
	}
	col := l.p.Graph().Collection(id)
	return col == nil || col.Bounded
}

// sqliteDSN resolves a SQLite DSN (a path or a file: URI) against the base
// directory and checks its file against the roots.
func (l *loader) sqliteDSN(t *transformSpec, n *yamlnode.Node, dsn string) (string, error) {
	p, resolved, memory, err := sqlsink.SQLitePath(dsn, l.opts.BaseDir)
	if err != nil {
		return "", l.wrapf(n, err, "WriteToSql dsn")
	}
	if memory {
		return resolved, nil
	}
	if err := l.files().Check(p); err != nil {
		return "", l.wrapf(n, err, "WriteToSql dsn")
	}
	return resolved, nil
}

// postgresDSN checks a PostgreSQL DSN before anything reads a file of it
// or connects: the files it names (sslrootcert, sslcert, sslkey,
// passfile), resolved against the base directory, must be inside the
// roots, a submitted pipeline may not name a servicefile (its entries
// could name any file), and its hosts must be allowed. It returns the
// DSN with those files made absolute.
func (l *loader) postgresDSN(n *yamlnode.Node, dsn string) (string, error) {
	files, resolved, err := sqlsink.PostgresFiles(dsn, l.opts.BaseDir)
	if err != nil {
		return "", l.wrapf(n, err, "WriteToSql dsn")
	}
	for _, f := range files {
		if f.Key == "servicefile" && l.files() != nil {
			return "", l.errf(n, "WriteToSql dsn: servicefile is not accepted in a pipeline sent to a server (its entries could name files outside --file-roots); put the settings in the dsn itself")
		}
		if err := l.files().Check(f.Path); err != nil {
			return "", l.wrapf(n, err, "WriteToSql dsn %s", f.Key)
		}
	}
	if err := l.sqlHosts().CheckDSN(resolved); err != nil {
		return "", l.wrapf(n, err, "WriteToSql dsn")
	}
	return resolved, nil
}

// NewAccess builds an Access: roots are the directories files may be in
// (files.NewRoots), reserved the paths no pipeline may touch inside them,
// sqlHosts the PostgreSQL hosts (sqlsink.NewHostPolicy; nil takes
// sqlsink.DefaultAllowedHosts).
func NewAccess(roots, reserved, sqlHosts []string) (*Access, error) {
	r, err := files.NewRoots(roots, reserved)
	if err != nil {
		return nil, err
	}
	if sqlHosts == nil {
		sqlHosts = sqlsink.DefaultAllowedHosts
	}
	h, err := sqlsink.NewHostPolicy(sqlHosts)
	if err != nil {
		return nil, err
	}
	return &Access{Files: r, SQLHosts: h}, nil
}
