// Package tables is the service's view of the SQL tables its jobs write
// (weir tables list, describe, merge): it reads the WriteToSql sinks of
// the job records' pipelines, the staged tables' members, rows and merges
// from their databases, runs merges on demand and records every merge,
// periodic or on demand, as a table_merged job event and in the merge
// counters (weir_sql_merges_total, weir_sql_merge_rows_total).
//
// It registers with the core as a core.Flow: Environment gives every
// YAML job's sinks the hook that reports their periodic merges.
//
// It may import service/internal/core, service/record, runner/contract
// (the SQL table administration and the sinks that say which table they
// write), yamlpipe (which hands it the SQL sink's administration), errcode
// and the standard library.
package tables

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/yamlpipe"
)

// Tables serves the SQL tables of the core's jobs.
type Tables struct {
	core.BaseFlow
	c      *core.Core
	merges sqlMerges
	// sql administers the staged tables and reads the publication logs.
	sql contract.SQLTableAdmin
}

// New returns the tables view of c; register it with c.Register.
func New(c *core.Core) *Tables { return &Tables{c: c, sql: yamlpipe.SQLTableAdmin(c.Now)} }

// Environment gives job j's WriteToSql sinks the hook through which their
// periodic merges become events and counts (core.Flow).
func (s *Tables) Environment(j *record.Job, env *yamlpipe.JobEnv) {
	env.OnSQLMerge = s.sqlMergeHook(j.ID)
}

// SQL tables: the tables the WriteToSql sinks of the server's jobs write,
// read from the job records' pipelines (sink configurations) and from the
// databases (a staged table's members, rows and merges), for `weir tables`.

// tableTimeout bounds the database work of one table request.
const tableTimeout = 30 * time.Second

// SQLMergeCount is what the staged merges of one table moved since the
// server started (weir_sql_merges_total, weir_sql_merge_rows_total).
type SQLMergeCount struct {
	Merges, Failures, Rows int64
}

// sqlMerges counts merges per table.
type sqlMerges struct {
	mu sync.Mutex
	m  map[string]SQLMergeCount
}

func (c *sqlMerges) add(table string, rows int64, failed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]SQLMergeCount{}
	}
	n := c.m[table]
	if failed {
		n.Failures++
	} else {
		n.Merges++
		n.Rows += rows
	}
	c.m[table] = n
}

// SQLMergeCounts returns, per staged table, the merges since the server
// started.
func (s *Tables) SQLMergeCounts() map[string]SQLMergeCount {
	s.merges.mu.Lock()
	defer s.merges.mu.Unlock()
	out := make(map[string]SQLMergeCount, len(s.merges.m))
	for k, v := range s.merges.m {
		out[k] = v
	}
	return out
}

// recordMerge records a merge of table as a table_merged event of job id
// (step: the sink step, empty for a merge on demand).
func (s *Tables) recordMerge(id, step, table string, rep contract.MergeReport, err error) {
	d := map[string]any{"table": table, "rows": rep.Rows, "duration_ms": rep.Duration.Milliseconds()}
	if step != "" {
		d["step"] = step
	}
	var moved []string
	for _, m := range rep.Members {
		moved = append(moved, fmt.Sprintf("%s:%d", m.Table, m.Rows))
	}
	d["members"] = strings.Join(moved, ",")
	if err != nil {
		d["error"] = err.Error()
		s.c.Emit(id, record.EventTableMerged, record.SeverityWarning,
			fmt.Sprintf("merging the staged table %s failed and changed nothing (retried at the next interval): %v", table, err), d)
		return
	}
	s.c.Emit(id, record.EventTableMerged, record.SeverityInfo,
		fmt.Sprintf("merged %d rows of the staged table %s into %s in %s", rep.Rows, table, rep.Principal, rep.Duration), d)
}

// sqlMergeHook is the JobEnv.OnSQLMerge of job id.
func (s *Tables) sqlMergeHook(id string) func(step string, rep contract.MergeReport, err error) {
	return func(step string, rep contract.MergeReport, err error) {
		s.merges.add(rep.Table, rep.Rows, err != nil)
		s.recordMerge(id, step, rep.Table, rep, err)
	}
}

// sqlTarget is one table a job's sink writes.
type sqlTarget struct {
	cfg  contract.SQLSinkTable
	jobs []*record.Job
}

// sqlTargets reads the WriteToSql sinks of every job's pipeline, by table
// name (driver and DSN disambiguate tables of one name in two databases:
// the first one found wins the name, the others are listed as name@driver).
// Active jobs come first in each target's jobs.
func (s *Tables) sqlTargets() ([]*sqlTarget, error) {
	jobs, err := s.c.List(core.StatusAll)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Active() && !jobs[b].Active() })
	byKey := map[string]*sqlTarget{}
	var out []*sqlTarget
	for _, j := range jobs {
		if j.SDK == record.SDKGo || j.Pipeline == "" {
			continue
		}
		p, err := s.c.LoadGraph(j)
		if err != nil {
			continue // a pipeline that no longer loads writes nothing now
		}
		for _, code := range p.Program().Code {
			sk, ok := code.(contract.SQLTableSink)
			if !ok {
				continue
			}
			c := sk.SQLSinkTable()
			key := c.Driver + "\x00" + c.DSN + "\x00" + c.Table
			t := byKey[key]
			if t == nil {
				t = &sqlTarget{cfg: c}
				byKey[key] = t
				out = append(out, t)
			}
			if !slices.ContainsFunc(t.jobs, func(o *record.Job) bool { return o.ID == j.ID }) {
				t.jobs = append(t.jobs, j)
			}
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].cfg.Table < out[b].cfg.Table })
	return out, nil
}

// describe fills the table's record, reading a staged table's members
// from its database when full.
func (t *sqlTarget) describe(ctx context.Context, sql contract.SQLTableAdmin, full bool) record.SQLTable {
	rt := record.SQLTable{Name: t.cfg.Table, Layout: t.cfg.Layout, Driver: t.cfg.Driver, DSN: t.cfg.DSN}
	for _, j := range t.jobs {
		if !slices.Contains(rt.Jobs, j.Name) {
			rt.Jobs = append(rt.Jobs, j.Name)
		}
	}
	if t.cfg.Layout != contract.SQLLayoutStaged {
		m := record.SQLTableMember{Table: t.cfg.Table, Role: "table", Rows: -1}
		n, exists, err := sql.TableRows(ctx, t.cfg.FacadeTable)
		switch {
		case err != nil:
			rt.Error = err.Error()
		case !exists:
			rt.Error = "the table does not exist yet"
		default:
			m.Rows = n
		}
		rt.Members = []record.SQLTableMember{m}
		return rt
	}
	info, err := sql.DescribeStaged(ctx, t.cfg.FacadeTable)
	if err != nil {
		if errors.Is(err, contract.ErrStaged) {
			rt.Error = "no staging table yet (the job has not prepared its sink)"
		} else {
			rt.Error = err.Error()
		}
		return rt
	}
	for _, m := range info.Members {
		rm := record.SQLTableMember{Table: m.Table, Role: m.Role, Generation: m.Generation, Rows: m.Rows}
		if full {
			rm.Columns = m.Columns
		}
		rt.Members = append(rt.Members, rm)
	}
	rt.View = info.View
	for i, m := range info.Merges {
		if !full && i > 0 {
			break
		}
		rt.Merges = append(rt.Merges, record.SQLTableMerge{At: m.At, Duration: m.Duration, Rows: m.Rows, Members: m.Members})
	}
	return rt
}

// SQLTables lists the SQL tables the server's jobs write, by name, with
// each staged table's members, row counts and last merge.
func (s *Tables) SQLTables(ctx context.Context) ([]record.SQLTable, error) {
	ts, err := s.sqlTargets()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, tableTimeout)
	defer cancel()
	out := make([]record.SQLTable, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.describe(ctx, s.sql, false))
	}
	return out, nil
}

func (s *Tables) sqlTarget(name string) (*sqlTarget, error) {
	ts, err := s.sqlTargets()
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if t.cfg.Table == name {
			return t, nil
		}
	}
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.cfg.Table
	}
	known := "none"
	if len(names) > 0 {
		known = strings.Join(names, ", ")
	}
	return nil, errcode.Errorf(errcode.TableNotFound, "no job of this server writes a SQL table %q (tables: %s); see weir tables list", name, known)
}

// SQLTable describes the table name: members with row counts and columns,
// the view's rule and the recent merges.
func (s *Tables) SQLTable(ctx context.Context, name string) (record.SQLTable, error) {
	t, err := s.sqlTarget(name)
	if err != nil {
		return record.SQLTable{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, tableTimeout)
	defer cancel()
	return t.describe(ctx, s.sql, true), nil
}

// MergeSQLTable merges the staged table name's staging tables into its
// principal table now, records a table_merged event on the jobs writing it
// (the active ones, else the newest) and returns what moved.
func (s *Tables) MergeSQLTable(ctx context.Context, name string) (record.SQLTableMerge, error) {
	t, err := s.sqlTarget(name)
	if err != nil {
		return record.SQLTableMerge{}, err
	}
	if t.cfg.Layout != contract.SQLLayoutStaged {
		return record.SQLTableMerge{}, errcode.Errorf(errcode.TableNotStaged,
			"table %s has layout %s: only a table written with layout: staged has staging tables to merge", name, t.cfg.Layout)
	}
	ctx, cancel := context.WithTimeout(ctx, tableTimeout)
	defer cancel()
	rep, err := s.sql.MergeStaged(ctx, t.cfg.FacadeTable)
	s.merges.add(name, rep.Rows, err != nil)
	var emitTo []*record.Job
	for _, j := range t.jobs {
		if j.Active() {
			emitTo = append(emitTo, j)
		}
	}
	if len(emitTo) == 0 && len(t.jobs) > 0 {
		emitTo = t.jobs[:1]
	}
	for _, j := range emitTo {
		s.recordMerge(j.ID, "", name, rep, err)
	}
	if err != nil {
		code := errcode.SinkUnavailable
		if errors.Is(err, contract.ErrStaged) {
			code = errcode.TableNotStaged
		}
		return record.SQLTableMerge{}, errcode.Errorf(code, "merging table %s: %w", name, err)
	}
	moved := make([]string, len(rep.Members))
	for i, m := range rep.Members {
		moved[i] = fmt.Sprintf("%s:%d", m.Table, m.Rows)
	}
	return record.SQLTableMerge{At: rep.At, Duration: rep.Duration, Rows: rep.Rows, Members: strings.Join(moved, ","), Principal: rep.Principal}, nil
}
