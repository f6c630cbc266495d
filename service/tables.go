package service

import (
	"context"

	"github.com/weir-dev/weir/service/internal/tables"
	"github.com/weir-dev/weir/service/record"
)

// SQLMergeCount is what the merges of one staged SQL table moved since the
// server started.
type SQLMergeCount = tables.SQLMergeCount

// SQLTables lists the SQL tables the server's jobs write (weir tables
// list).
func (s *Service) SQLTables(ctx context.Context) ([]record.SQLTable, error) {
	return s.tables.SQLTables(ctx)
}

// SQLTable describes one SQL table the server's jobs write: its members,
// their rows and columns, the view's rule and the recent merges
// (TABLE_NOT_FOUND when no job writes it).
func (s *Service) SQLTable(ctx context.Context, name string) (record.SQLTable, error) {
	return s.tables.SQLTable(ctx, name)
}

// MergeSQLTable merges a staged table's staging tables into its principal
// table now (TABLE_NOT_STAGED for another layout).
func (s *Service) MergeSQLTable(ctx context.Context, name string) (record.SQLTableMerge, error) {
	return s.tables.MergeSQLTable(ctx, name)
}

// SQLMergeCounts returns the merges of each staged table since the server
// started, for the metrics.
func (s *Service) SQLMergeCounts() map[string]SQLMergeCount { return s.tables.SQLMergeCounts() }

// Partitions returns the publication log of job name's partition runs:
// published, staged, shadow and running partitions (weir partitions list).
func (s *Service) Partitions(ctx context.Context, name string) ([]record.PartitionRun, error) {
	return s.tables.Partitions(ctx, name)
}

// PrunePartitions removes the staging tables and version directories job
// name's partition runs left without publishing: the staged and shadow
// entries of Partitions (of partition, when not empty; of statuses, when
// given), never a published or running one. With dryRun it removes
// nothing and returns what it would remove (weir partitions prune).
func (s *Service) PrunePartitions(ctx context.Context, name, partition string, statuses []string, dryRun bool) ([]record.PartitionRun, error) {
	return s.tables.Prune(ctx, name, partition, statuses, dryRun)
}
