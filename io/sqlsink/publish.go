package sqlsink

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-dev/weir/internal/setdigest"
)

// Staged publication (a partition run of a bounded job): the sink writes a
// staging table of its own, Stage.Target + "__stage_" + partition + "_" +
// run, exactly once per checkpoint epoch as any sink does; when the run
// ends (Close after the final commit) it publishes the staged rows in one
// transaction: the publication log is checked for (job name, partition,
// manifest digest, target) — when it is there nothing is published — then
// the target's rows of the partition (column weir_partition) are deleted,
// the staged rows inserted with the partition, and a log entry written
// (weir_publications: job, partition, manifest digest, output digest, row
// counts, time). The staging table is dropped after the commit. A crash
// before the commit leaves the target untouched and the staging table
// complete; the resumed run publishes it. A crash after the commit leaves
// the log entry, so the resumed run (or a rerun of the partition) publishes
// nothing.

// Stage makes a sink a partition run's staged writer (see above).
type Stage struct {
	// Target is the table the rows are published to.
	Target string
	// JobName, JobID, Partition and ManifestDigest identify the run in the
	// publication log; (JobName, Partition, ManifestDigest, Target) is
	// published at most once.
	JobName, JobID, Partition, ManifestDigest string
	// Shadow makes the run stage only: its staging table is kept, nothing
	// is published and the log is not written (a shadow run, compared
	// with weir diff).
	Shadow bool
}

// PublicationTable is the publication log's table, in the target's
// database.
const PublicationTable = "weir_publications"

// PartitionColumn is the column the target table carries the partition in.
const PartitionColumn = "weir_partition"

// crashEnv, set to "before-publish" or "after-publish" in a test's server,
// kills the process (SIGKILL) at that point of a publication: the crash
// tests' seeded points.
const crashEnv = "WEIR_TEST_PUBLISH_CRASH"

var stageSafe = regexp.MustCompile(`[^A-Za-z0-9_]`)

// StageTable returns the staging table of target for a run of partition
// with run ID run: target + "__stage_" + partition + "_" + run, every
// character but letters, digits and '_' as '_'. When that name would pass
// PostgreSQL's 63 bytes, partition + "_" + run is replaced by the first 16
// hex digits of their SHA-256, so a target of up to 39 bytes can still be
// staged (the name keeps the target + "__stage_" prefix PartitionLog
// finds staging tables by).
func StageTable(target, partition, run string) string {
	suffix := stageSafe.ReplaceAllString(partition, "_") + "_" + stageSafe.ReplaceAllString(run, "_")
	if _, name := splitTable(target); len(name)+len("__stage_")+len(suffix) > PostgresIdentifierLimit {
		sum := sha256.Sum256([]byte(partition + "\x00" + run))
		suffix = hex.EncodeToString(sum[:8])
	}
	return target + "__stage_" + suffix
}

// pubTx is one transaction of either backend.
type pubTx interface {
	exec(ctx context.Context, q string, args ...any) (int64, error)
	query(ctx context.Context, q string, args ...any) (cols []string, rows [][]any, err error)
	// each calls fn with the columns and every row of q, one at a time
	// (vals is fn's only until it returns), and returns the columns (also
	// of no rows).
	each(ctx context.Context, q string, args []any, fn func(cols []string, vals []any) error) (cols []string, err error)
	commit(ctx context.Context) error
	rollback(ctx context.Context)
}

// publishLocked publishes the staged rows (s.cfg.Table) to the stage's
// target. The caller holds dbMu; the backend is open.
func (s *Sink) publishLocked(ctx context.Context) error {
	st := s.cfg.Stage
	if st.Shadow {
		return nil // a shadow run keeps its staging table
	}
	var tx pubTx
	switch be := s.db.be.(type) {
	case *sqliteDB:
		t, err := be.db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("publishing %s: %w", st.Target, err)
		}
		tx = sqlTx{t}
	case *pgDB:
		t, err := be.conn.Begin(ctx)
		if err != nil {
			return fmt.Errorf("publishing %s: %w", st.Target, err)
		}
		tx = pgTx{t}
	default:
		return fmt.Errorf("publishing %s: staged publication needs a SQLite or PostgreSQL sink", st.Target)
	}
	crashAt("before-publish")
	published, err := publishTx(ctx, tx, st, s.cfg.Table, s.cfg.Now())
	if err != nil {
		tx.rollback(ctx)
		return fmt.Errorf("publishing partition %s of %s from %s: %w", st.Partition, st.Target, s.cfg.Table, err)
	}
	if err := tx.commit(ctx); err != nil {
		return fmt.Errorf("publishing partition %s of %s: committing: %w", st.Partition, st.Target, err)
	}
	if published {
		crashAt("after-publish")
	}
	if err := s.db.be.exec(ctx, "DROP TABLE IF EXISTS "+quoteTable(s.cfg.Table)); err != nil {
		return fmt.Errorf("dropping the staging table %s after publishing: %w", s.cfg.Table, err)
	}
	return nil
}

// crashAt kills the process when the crash tests ask for point.
func crashAt(point string) {
	if os.Getenv(crashEnv) == point {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}

// publishTx does the publication's work in tx; false when the log shows
// it was done already (nothing changed).
func publishTx(ctx context.Context, tx pubTx, st *Stage, stage string, now time.Time) (bool, error) {
	if _, err := tx.exec(ctx, `CREATE TABLE IF NOT EXISTS `+PublicationTable+` (
		job_name TEXT NOT NULL, partition_id TEXT NOT NULL, manifest_digest TEXT NOT NULL, target TEXT NOT NULL,
		job_id TEXT NOT NULL, output_digest TEXT NOT NULL, row_count BIGINT NOT NULL, replaced_rows BIGINT NOT NULL,
		published_at TEXT NOT NULL, PRIMARY KEY (job_name, partition_id, manifest_digest, target))`); err != nil {
		return false, fmt.Errorf("creating the publication log: %w", err)
	}
	_, done, err := tx.query(ctx, `SELECT job_id FROM `+PublicationTable+` WHERE job_name = ? AND partition_id = ? AND manifest_digest = ? AND target = ?`,
		st.JobName, st.Partition, st.ManifestDigest, st.Target)
	if err != nil {
		return false, fmt.Errorf("reading the publication log: %w", err)
	}
	if len(done) > 0 {
		return false, nil
	}
	// The staged rows are digested as they are read, in bounded memory
	// (package setdigest): a partition of any size.
	d := setdigest.New(0)
	defer d.Close()
	cols, err := tx.each(ctx, `SELECT * FROM `+quoteTable(stage), nil, func(cols []string, vals []any) error {
		return d.Add(digestLine(cols, vals))
	})
	if err != nil {
		return false, fmt.Errorf("reading the staged rows: %w", err)
	}
	digest, err := d.Sum()
	if err != nil {
		return false, err
	}
	if _, err := tx.exec(ctx, `CREATE TABLE IF NOT EXISTS `+quoteTable(st.Target)+` AS SELECT *, CAST('' AS TEXT) AS `+PartitionColumn+` FROM `+quoteTable(stage)+` WHERE 1 = 0`); err != nil {
		return false, fmt.Errorf("creating the target table: %w", err)
	}
	replaced, err := tx.exec(ctx, `DELETE FROM `+quoteTable(st.Target)+` WHERE `+PartitionColumn+` = ?`, st.Partition)
	if err != nil {
		return false, fmt.Errorf("deleting the partition's published rows: %w", err)
	}
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = quoteIdent(c)
	}
	list := strings.Join(quoted, ", ")
	if _, err := tx.exec(ctx, `INSERT INTO `+quoteTable(st.Target)+` (`+list+`, `+PartitionColumn+`) SELECT `+list+`, ? FROM `+quoteTable(stage), st.Partition); err != nil {
		return false, fmt.Errorf("inserting the staged rows: %w", err)
	}
	if _, err := tx.exec(ctx, `INSERT INTO `+PublicationTable+` (job_name, partition_id, manifest_digest, target, job_id, output_digest, row_count, replaced_rows, published_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, st.JobName, st.Partition, st.ManifestDigest, st.Target, st.JobID,
		digest, d.Len(), replaced, now.UTC().Format(time.RFC3339Nano)); err != nil {
		return false, fmt.Errorf("writing the publication log: %w", err)
	}
	return true, nil
}

// digestSkip are the bookkeeping columns an output digest leaves out: they
// differ between two runs of the same output.
var digestSkip = map[string]bool{"updated_at": true, "job_id": true, "generation": true}

// digestLine is row r (of columns cols) as a line of a publication's
// output digest (a set of lines: package setdigest): its values but the
// bookkeeping columns (updated_at, job_id, generation), each quoted,
// separated by 0x1f.
func digestLine(cols []string, r []any) string {
	var b strings.Builder
	for j, v := range r {
		if j < len(cols) && digestSkip[strings.ToLower(cols[j])] {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\x1f')
		}
		b.WriteString(strconv.Quote(fmt.Sprint(v)))
	}
	return b.String()
}

// sqlTx is a database/sql transaction (SQLite).
type sqlTx struct{ tx *sql.Tx }

func (t sqlTx) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := t.tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t sqlTx) query(ctx context.Context, q string, args ...any) ([]string, [][]any, error) {
	var out [][]any
	cols, err := t.each(ctx, q, args, func(_ []string, vals []any) error {
		out = append(out, slices.Clone(vals))
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return cols, out, nil
}

func (t sqlTx) each(ctx context.Context, q string, args []any, fn func([]string, []any) error) ([]string, error) {
	rows, err := t.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		if err := fn(cols, vals); err != nil {
			return nil, err
		}
	}
	return cols, rows.Err()
}

func (t sqlTx) commit(context.Context) error { return t.tx.Commit() }
func (t sqlTx) rollback(context.Context)     { _ = t.tx.Rollback() }

// pgTx is a pgx transaction (PostgreSQL); '?' placeholders become $n.
type pgTx struct{ tx pgx.Tx }

func pgPlaceholders(q string) string {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (t pgTx) exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, pgPlaceholders(q), args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (t pgTx) query(ctx context.Context, q string, args ...any) ([]string, [][]any, error) {
	var out [][]any
	cols, err := t.each(ctx, q, args, func(_ []string, vals []any) error {
		out = append(out, vals) // rows.Values returns a new slice per row
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return cols, out, nil
}

func (t pgTx) each(ctx context.Context, q string, args []any, fn func([]string, []any) error) ([]string, error) {
	rows, err := t.tx.Query(ctx, pgPlaceholders(q), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cols []string
	for _, f := range rows.FieldDescriptions() {
		cols = append(cols, f.Name)
	}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		if err := fn(cols, vals); err != nil {
			return nil, err
		}
	}
	return cols, rows.Err()
}

func (t pgTx) commit(ctx context.Context) error { return t.tx.Commit(ctx) }
func (t pgTx) rollback(ctx context.Context)     { _ = t.tx.Rollback(ctx) }
