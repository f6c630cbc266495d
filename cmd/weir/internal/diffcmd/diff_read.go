package diffcmd

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver

	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/diff"
	"github.com/weir-dev/weir/io/files"
	"github.com/weir-dev/weir/io/sqlsink" // also registers the "sqlite" driver
	"github.com/weir-dev/weir/service/record"
)

// specKind is what an output specifier of `weir diff` names.
type specKind int

const (
	specFile specKind = iota
	// specPublished: a partition's published version, read through a
	// file sink's publication manifest (PATH.manifest.json#PARTITION).
	specPublished
	specSQLite
	specPostgres
	specJob
)

// outputSpec is a parsed output specifier of `weir diff`: files, a SQL
// table or a job's output.
type outputSpec struct {
	raw  string
	kind specKind
	// path is the file, glob or directory (specFile) or the SQLite
	// database file (specSQLite); format the files' format.
	path   string
	format files.Format
	// dsn and table name a SQL table.
	dsn   string
	table string
	// job and step name a job's output (specJob).
	job, step string
	// key is the key a job's file output has, from the job's graph (a
	// resolved job:NAME of a file sink; see SinkKey).
	key []string
}

// fileFormats maps file extensions to formats.
var fileFormats = map[string]files.Format{
	".json": files.JSONLines, ".jsonl": files.JSONLines, ".ndjson": files.JSONLines,
	".csv": files.CSV, ".parquet": files.Parquet, ".avro": files.Avro,
	".txt": files.Text, // WriteToText's lines, read as {"line": text}
}

const specHelp = "want a file (.jsonl, .json, .csv, .parquet, .avro, .txt), a glob or a directory of part files, PATH.manifest.json#PARTITION, sqlite:PATH#TABLE, postgres://...#TABLE or job:NAME[/STEP]"

// parseOutputSpec parses an output specifier. A file's format comes from
// its extension; a directory's from its files' (checked when read).
func parseOutputSpec(s string) (outputSpec, error) {
	// raw names the output in messages: without a URL's password.
	sp := outputSpec{raw: Redact(s)}
	bad := func(why string) (outputSpec, error) {
		return outputSpec{}, cli.UsageErrorf("output %q: %s (%s)", sp.raw, why, specHelp)
	}
	switch {
	case strings.TrimSpace(s) == "":
		return bad("empty")
	case strings.HasPrefix(s, "sqlite:"):
		i := strings.LastIndexByte(s, '#')
		if i < 0 {
			return bad("a SQLite table is sqlite:PATH#TABLE, and the #TABLE is missing")
		}
		sp.kind, sp.path, sp.table = specSQLite, strings.TrimPrefix(s[:i], "sqlite:"), s[i+1:]
		sp.path = strings.TrimPrefix(sp.path, "//")
		if sp.path == "" {
			return bad("no database file before #TABLE")
		}
	case strings.HasPrefix(s, "postgres://"), strings.HasPrefix(s, "postgresql://"):
		i := strings.LastIndexByte(s, '#')
		if i < 0 {
			return bad("a PostgreSQL table is postgres://...#TABLE, and the #TABLE is missing")
		}
		sp.kind, sp.dsn, sp.table = specPostgres, s[:i], s[i+1:]
	case strings.HasPrefix(s, "job:"):
		sp.kind = specJob
		sp.job, sp.step, _ = strings.Cut(strings.TrimPrefix(s, "job:"), "/")
		if !record.IsJobName(sp.job) {
			return bad(fmt.Sprintf("%q is not a job name", sp.job))
		}
		return sp, nil
	case strings.Contains(s, "://"):
		return bad("unknown scheme")
	case strings.Contains(s, manifestSuffix+"#"):
		i := strings.LastIndex(s, manifestSuffix+"#")
		sp.kind, sp.path, sp.table = specPublished, s[:i+len(manifestSuffix)], s[i+len(manifestSuffix)+1:]
		if sp.table == "" {
			return bad("no partition after #")
		}
		f, ok := fileFormats[strings.ToLower(filepath.Ext(strings.TrimSuffix(sp.path, manifestSuffix)))]
		if !ok {
			return bad("cannot tell the published files' format from the sink path's extension")
		}
		sp.format = f
		return sp, nil
	default:
		sp.kind, sp.path = specFile, s
		if fi, err := os.Stat(s); err == nil && fi.IsDir() {
			return sp, nil
		}
		f, ok := fileFormats[strings.ToLower(filepath.Ext(s))]
		if !ok {
			return bad("cannot tell the format from the extension")
		}
		sp.format = f
		return sp, nil
	}
	if sp.table == "" {
		return bad("no table after #")
	}
	if strings.ContainsAny(sp.table, "\"\x00") {
		return bad(fmt.Sprintf("%q is not a table name", sp.table))
	}
	return sp, nil
}

// filesOf lists the files of a file output: the glob's matches, the file,
// or a directory's part files (hidden files and files starting with "_",
// such as weir's owner file or _SUCCESS, left out), all of one format.
func (sp *outputSpec) filesOf() ([]string, files.Format, error) {
	if sp.kind == specPublished {
		return sp.publishedFiles()
	}
	fi, err := os.Stat(sp.path)
	if err != nil || !fi.IsDir() {
		paths, err := files.Files(sp.path)
		if err != nil {
			return nil, 0, err
		}
		for _, p := range paths {
			if _, err := os.Stat(p); err != nil {
				return nil, 0, err // names the path
			}
		}
		return paths, sp.format, nil
	}
	entries, err := os.ReadDir(sp.path)
	if err != nil {
		return nil, 0, err
	}
	var paths []string
	ext := ""
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") || !e.Type().IsRegular() {
			continue
		}
		x := strings.ToLower(filepath.Ext(n))
		if _, ok := fileFormats[x]; !ok {
			return nil, 0, fmt.Errorf("directory %s holds %s, whose format the extension does not tell", sp.path, n)
		}
		if ext != "" && fileFormats[x] != fileFormats[ext] {
			return nil, 0, fmt.Errorf("directory %s mixes formats (%s and %s): give a glob", sp.path, ext, x)
		}
		ext = x
		paths = append(paths, filepath.Join(sp.path, n))
	}
	if len(paths) == 0 {
		return nil, 0, fmt.Errorf("directory %s holds no part file", sp.path)
	}
	sort.Strings(paths)
	return paths, fileFormats[ext], nil
}

// manifestSuffix ends a file sink's publication manifest.
const manifestSuffix = ".manifest.json"

// publishedFiles lists the files of the partition's published version
// (specPublished), as the publication manifest names them.
func (sp *outputSpec) publishedFiles() ([]string, files.Format, error) {
	if _, err := os.Stat(sp.path); err != nil {
		return nil, 0, err // names the path
	}
	sink := strings.TrimSuffix(sp.path, manifestSuffix)
	m, _, err := files.ReadPublicationManifest(sink)
	if err != nil {
		return nil, 0, err
	}
	p := m.Partitions[sp.table]
	if p == nil {
		names := make([]string, 0, len(m.Partitions))
		for n := range m.Partitions {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, 0, fmt.Errorf("%s has not published partition %q (published: %s)", sp.path, sp.table, strings.Join(names, ", "))
	}
	paths := make([]string, 0, len(p.Files))
	for _, f := range p.Files {
		paths = append(paths, filepath.Join(filepath.Dir(sink), filepath.FromSlash(f.Path)))
	}
	return paths, sp.format, nil
}

// records calls fn with every record of the output.
func (sp *outputSpec) records(ctx context.Context, fn func(map[string]any) error) error {
	switch sp.kind {
	case specFile, specPublished:
		paths, format, err := sp.filesOf()
		if err != nil {
			return err
		}
		for _, p := range paths {
			if err := files.Records(ctx, p, format, fn); err != nil {
				return err
			}
		}
		return nil
	case specSQLite, specPostgres:
		db, err := sp.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		return sqlRecords(ctx, db, sp.table, fn)
	}
	return cli.UsageErrorf("output %q: a job output is read through its sink table; this one was not resolved (give sqlite:PATH#TABLE, postgres://...#TABLE or its files)", sp.raw)
}

// open connects to the output's database, read-only for SQLite.
func (sp *outputSpec) open(ctx context.Context) (*sql.DB, error) {
	var db *sql.DB
	var err error
	if sp.kind == specSQLite {
		if _, err := os.Stat(sp.path); err != nil {
			return nil, err // names the path
		}
		db, err = sql.Open("sqlite", "file:"+sp.path+"?mode=ro&_pragma=busy_timeout(5000)")
	} else {
		db, err = sql.Open("pgx", sp.dsn)
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", sp.raw, err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connecting to %s: %w", sp.raw, err)
	}
	return db, nil
}

// QuoteIdent quotes a table name, schema-qualified or not.
func QuoteIdent(t string) string {
	parts := strings.Split(t, ".")
	for i, p := range parts {
		parts[i] = `"` + strings.ReplaceAll(p, `"`, `""`) + `"`
	}
	return strings.Join(parts, ".")
}

// sqlRecords reads every row of a table or view (a façade view shows what
// consumers see; an upsert table holds one row per key and window, its
// newest revision).
func sqlRecords(ctx context.Context, db *sql.DB, table string, fn func(map[string]any) error) error {
	rows, err := db.QueryContext(ctx, "SELECT * FROM "+QuoteIdent(table))
	if err != nil {
		return fmt.Errorf("reading table %s: %w", table, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return fmt.Errorf("reading table %s: %w", table, err)
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("reading table %s: %w", table, err)
		}
		rec := make(map[string]any, len(cols))
		for i, c := range cols {
			if b, ok := vals[i].([]byte); ok {
				rec[c] = string(b)
			} else {
				rec[c] = vals[i]
			}
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading table %s: %w", table, err)
	}
	return nil
}

// declaredKey returns the key fields a weir SQL sink declared for the
// output's table (the plain columns of its weir key index; for a façade
// view, of a generation's table); nil when the output is no such table.
func (sp *outputSpec) declaredKey(ctx context.Context) ([]string, error) {
	if sp.kind != specSQLite && sp.kind != specPostgres {
		return nil, nil
	}
	db, err := sp.open(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var exists bool
	q := `SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ?)`
	arg := sp.table
	if sp.kind == specPostgres {
		q, arg = `SELECT to_regclass($1) IS NOT NULL`, QuoteIdent(sp.table)
	}
	if err := db.QueryRowContext(ctx, q, arg).Scan(&exists); err != nil {
		return nil, fmt.Errorf("finding table %s of %s: %w", sp.table, sp.raw, err)
	}
	if !exists {
		return nil, fmt.Errorf("%s: the database has no table or view %s", sp.raw, sp.table)
	}
	tables := []string{sp.table}
	gens, err := facadeGenerations(ctx, db, sp.kind, sp.table)
	if err != nil {
		return nil, err
	}
	tables = append(tables, gens...)
	for _, t := range tables {
		key, err := keyColumns(ctx, db, sp.kind, t)
		if err != nil {
			return nil, fmt.Errorf("reading the key of %s: %w", sp.raw, err)
		}
		if len(key) > 0 {
			return key, nil
		}
	}
	return nil, nil
}

// keyColumns returns the plain columns of table's weir key index.
func keyColumns(ctx context.Context, db *sql.DB, kind specKind, table string) ([]string, error) {
	prefix := sqlsink.KeyIndexPrefix(table)
	var q string
	var args []any
	if kind == specSQLite {
		q = `SELECT m.name, i.name FROM sqlite_master AS m, pragma_index_info(m.name) AS i WHERE m.type = 'index' AND m.tbl_name = ? ORDER BY m.name, i.seqno`
		args = []any{table}
	} else {
		q = `SELECT ic.relname, a.attname FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
			JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
			WHERE i.indrelid = to_regclass($1) ORDER BY ic.relname, array_position(i.indkey::int2[], a.attnum)`
		args = []any{QuoteIdent(table)}
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var key []string
	for rows.Next() {
		var index string
		var col sql.NullString
		if err := rows.Scan(&index, &col); err != nil {
			return nil, err
		}
		if strings.HasPrefix(index, prefix) && col.Valid && col.String != "" {
			key = append(key, col.String)
		}
	}
	return key, rows.Err()
}

// facadeGenerations returns the physical tables of a façade view
// (TABLE__gN), newest first.
func facadeGenerations(ctx context.Context, db *sql.DB, kind specKind, table string) ([]string, error) {
	schema, name := "", table
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		schema, name = table[:i+1], table[i+1:]
	}
	q := `SELECT name FROM sqlite_master WHERE type = 'table'`
	if kind == specPostgres {
		q = `SELECT relname FROM pg_class WHERE relkind IN ('r', 'p')`
	}
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("listing the tables of %s: %w", table, err)
	}
	defer rows.Close()
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `__g([0-9]+)$`)
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		if re.MatchString(n) {
			out = append(out, schema+n)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return len(out[i]) > len(out[j]) || (len(out[i]) == len(out[j]) && out[i] > out[j])
	})
	return out, rows.Err()
}

// sideRows is one side of `weir diff` read into sorters.
type sideRows struct {
	rows    *diff.Sorter
	records int64
	// rejects counts rejected elements by reason; rejected sums the
	// conserved field over them.
	rejects     map[string]int64
	rejectedN   int64
	rejectedSum float64
	hasRejects  bool
	// partitioned: the output has a weir_partition column (diff
	// --partition kept one partition's rows of it).
	partitioned bool
}

// readSide reads an output (and its rejects) into one sorter: the output's
// rows under output "output", the rejects under "rejects".
func readSide(ctx context.Context, out outputSpec, rejects *outputSpec, layout diff.Layout, inField string, memRows int, partition string) (*sideRows, error) {
	s := &sideRows{rows: diff.NewSorter("", memRows), rejects: map[string]int64{}}
	n := int64(0)
	err := out.records(ctx, func(rec map[string]any) error {
		if partition != "" {
			if p, ok := rec[sqlsink.PartitionColumn]; ok {
				s.partitioned = true
				if fmt.Sprint(p) != partition {
					return nil // another partition's row
				}
			}
		}
		n++
		r, err := layout.Row(rec)
		if err != nil {
			return fmt.Errorf("%s, row %d: %w", out.raw, n, err)
		}
		return s.rows.Add(r)
	})
	if err != nil {
		s.rows.Close()
		return nil, err
	}
	s.records = n
	if rejects != nil {
		s.hasRejects = true
		n = 0
		err := rejects.records(ctx, func(rec map[string]any) error {
			n++
			r, el, err := diff.RejectRow("rejects", rec)
			if err != nil {
				return fmt.Errorf("%s, row %d: %w", rejects.raw, n, err)
			}
			s.rejects[r.Reject]++
			s.rejectedN++
			if inField != "" {
				if f, ok := numberOf(el[inField]); ok {
					s.rejectedSum += f
				}
			}
			return s.rows.Add(r)
		})
		if err != nil {
			s.rows.Close()
			return nil, err
		}
	}
	return s, nil
}

// numberOf returns a normalized JSON number as a float64.
func numberOf(v any) (float64, bool) {
	n, ok := diff.Normalize(v).(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// Redact returns output specifier spec fit to print: a postgres:// URL's
// password replaced by xxxxx (the URL's other parts kept).
func Redact(spec string) string {
	if !strings.HasPrefix(spec, "postgres://") && !strings.HasPrefix(spec, "postgresql://") {
		return spec
	}
	dsn, table, hasTable := strings.Cut(spec, "#")
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://(a URL that does not parse)#" + table
	}
	out := u.Redacted()
	if hasTable {
		out += "#" + table
	}
	return out
}
