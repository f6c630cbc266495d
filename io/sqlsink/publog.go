package sqlsink

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/weir-dev/weir/runner/contract"
)

// Publication is one entry of the publication log (contract.Publication).
type Publication = contract.Publication

// PartitionLog reads, from the database of t (t.Table is the target), the
// publication log's entries of job name jobName for the target, by
// partition, and the names of the staging tables of the target that exist
// (target + "__stage_" prefix). A database without a log has no entries.
func PartitionLog(ctx context.Context, t StagedTarget, jobName string) (pubs []Publication, stages map[string]bool, err error) {
	stages = map[string]bool{}
	err = withFacade(ctx, t.facade(), func(fx facadeExec, _ time.Time) error {
		kind, err := fxKind(ctx, fx, PublicationTable)
		if err != nil {
			return err
		}
		if kind != "" {
			q := `SELECT job_name, partition_id, manifest_digest, target, job_id, output_digest, row_count, replaced_rows, published_at FROM ` +
				PublicationTable + ` WHERE job_name = ? AND target = ?`
			if fx.pg() {
				q = pgPlaceholders(q)
			}
			rows, err := fx.query(ctx, q, jobName, t.Table)
			if err != nil {
				return fmt.Errorf("reading the publication log %s: %w", PublicationTable, err)
			}
			for _, r := range rows {
				p := Publication{JobName: str(r[0]), Partition: str(r[1]), ManifestDigest: str(r[2]), Target: str(r[3]),
					JobID: str(r[4]), OutputDigest: str(r[5]), Rows: num(r[6]), Replaced: num(r[7]), PublishedAt: str(r[8])}
				pubs = append(pubs, p)
			}
		}
		var names [][]any
		if fx.pg() {
			schema, _ := splitTable(t.Table)
			names, err = fx.query(ctx, `SELECT tablename::text FROM pg_tables WHERE schemaname = COALESCE(NULLIF($1, ''), current_schema())`, schema)
		} else {
			names, err = fx.query(ctx, `SELECT name FROM sqlite_master WHERE type = 'table'`)
		}
		if err != nil {
			return fmt.Errorf("listing the staging tables of %s: %w", t.Table, err)
		}
		_, base := splitTable(t.Table)
		for _, r := range names {
			if n := str(r[0]); strings.HasPrefix(strings.ToLower(n), strings.ToLower(base)+"__stage_") {
				stages[strings.ToLower(n)] = true
			}
		}
		return nil
	})
	sort.SliceStable(pubs, func(a, b int) bool { return pubs[a].Partition < pubs[b].Partition })
	return pubs, stages, err
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

func num(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int32:
		return int64(x)
	case float64:
		return int64(x)
	}
	return 0
}

// DropStage drops stage, a staging table of the target t.Table (one that
// StageTable names, target + "__stage_" prefix), from t's database: the
// leftover of a partition run that did not publish (weir partitions
// prune). It refuses any other name and anything but a table, and does
// nothing when the table is gone already.
func DropStage(ctx context.Context, t StagedTarget, stage string) error {
	schema, base := splitTable(t.Table)
	sSchema, sBase := splitTable(stage)
	if !strings.EqualFold(schema, sSchema) || !strings.HasPrefix(strings.ToLower(sBase), strings.ToLower(base)+"__stage_") {
		return fmt.Errorf("%s is not a staging table of %s", stage, t.Table)
	}
	return withFacade(ctx, t.facade(), func(fx facadeExec, _ time.Time) error {
		kind, err := fxKind(ctx, fx, stage)
		if err != nil {
			return err
		}
		switch kind {
		case "":
			return nil
		case "table":
		default:
			return fmt.Errorf("%s is a %s, not a staging table: left as it is", stage, kind)
		}
		if err := fx.exec(ctx, "DROP TABLE "+quoteTable(stage)); err != nil {
			return fmt.Errorf("dropping the staging table %s: %w", stage, err)
		}
		return nil
	})
}
