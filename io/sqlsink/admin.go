package sqlsink

import (
	"context"
	"time"

	"github.com/weir-dev/weir/runner/contract"
)

// Admin administers the tables behind façade and staged views for the job
// service's flows (contract.SQLTableAdmin), through the package's
// functions. The zero value is usable.
type Admin struct {
	// Now is the clock; default time.Now.
	Now func() time.Time
}

var _ contract.SQLTableAdmin = Admin{}

func (a Admin) facade(t contract.FacadeTable) FacadeTarget {
	return FacadeTarget{Driver: t.Driver, DSN: t.DSN, Table: t.Table, Now: a.Now, BusyTimeout: t.BusyTimeout}
}

func (a Admin) staged(t contract.FacadeTable) StagedTarget {
	return StagedTarget{Driver: t.Driver, DSN: t.DSN, Table: t.Table, Now: a.Now, BusyTimeout: t.BusyTimeout}
}

// FacadeGenerations is FacadeGenerations.
func (a Admin) FacadeGenerations(ctx context.Context, t contract.FacadeTable) ([]FacadeGeneration, error) {
	return FacadeGenerations(ctx, a.facade(t))
}

// FacadeGenerationRows is FacadeGenerationRows.
func (a Admin) FacadeGenerationRows(ctx context.Context, t contract.FacadeTable, gen int64) ([]GenerationRow, bool, error) {
	return FacadeGenerationRows(ctx, a.facade(t), gen)
}

// EndFacadeGeneration is EndFacadeGeneration, recording the end at at
// (zero: now).
func (a Admin) EndFacadeGeneration(ctx context.Context, t contract.FacadeTable, gen int64, at time.Time) error {
	ft := a.facade(t)
	if !at.IsZero() {
		ft.Now = func() time.Time { return at }
	}
	return EndFacadeGeneration(ctx, ft, gen)
}

// RevealFacadeGeneration is RevealFacadeGeneration.
func (a Admin) RevealFacadeGeneration(ctx context.Context, t contract.FacadeTable, gen int64) error {
	return RevealFacadeGeneration(ctx, a.facade(t), gen)
}

// DropFacadeGeneration is DropFacadeGeneration.
func (a Admin) DropFacadeGeneration(ctx context.Context, t contract.FacadeTable, gen int64) error {
	return DropFacadeGeneration(ctx, a.facade(t), gen)
}

// CompactFacade is CompactFacade.
func (a Admin) CompactFacade(ctx context.Context, t contract.FacadeTable, keep int64, retention time.Duration) (CompactReport, error) {
	return CompactFacade(ctx, a.facade(t), keep, retention)
}

// TableRows is TableRows.
func (a Admin) TableRows(ctx context.Context, t contract.FacadeTable) (int64, bool, error) {
	return TableRows(ctx, a.staged(t))
}

// DescribeStaged is DescribeStaged.
func (a Admin) DescribeStaged(ctx context.Context, t contract.FacadeTable) (StagedInfo, error) {
	return DescribeStaged(ctx, a.staged(t))
}

// MergeStaged is MergeStaged.
func (a Admin) MergeStaged(ctx context.Context, t contract.FacadeTable) (MergeReport, error) {
	return MergeStaged(ctx, a.staged(t))
}

// PartitionLog is PartitionLog.
func (a Admin) PartitionLog(ctx context.Context, t contract.FacadeTable, jobName string) ([]Publication, map[string]bool, error) {
	return PartitionLog(ctx, a.staged(t), jobName)
}

// DropStage is DropStage.
func (a Admin) DropStage(ctx context.Context, t contract.FacadeTable, stage string) error {
	return DropStage(ctx, a.staged(t), stage)
}

// StageTable is StageTable.
func (Admin) StageTable(target, partition, run string) string {
	return StageTable(target, partition, run)
}

// SQLSinkTable describes the table the sink writes
// (contract.SQLTableSink).
func (s *Sink) SQLSinkTable() contract.SQLSinkTable {
	t := contract.SQLSinkTable{FacadeTable: s.FacadeTable(), Layout: s.cfg.Layout}
	if s.cfg.Stage != nil {
		t.StageTarget = s.cfg.Stage.Target
	}
	return t
}

var _ contract.SQLTableSink = (*Sink)(nil)
