package sqlquery

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
	"github.com/weir-dev/weir/yamlpipe/join"
)

// RowFn runs a per-row query (Query.PerRow) once for each element: the
// element's row is the input table's only row, and each result row is
// emitted with the element's timestamp, window and pane. A query that
// fails on a row makes the element a reject (ReasonSQLError). Each worker
// has its own database (Clone), opened at its first element and closed
// when the worker's copy is garbage.
type RowFn struct {
	Q *Query
	// Keep makes the step a filter: it emits the element itself, unchanged,
	// when the query returns a row for it (Filter's language: sql).
	Keep bool

	mu   sync.Mutex // guards d: the runner calls one copy from one worker
	d    *db
	rows [][]*row.Row
}

// Clone implements contract.Cloner: a copy without a database.
func (f *RowFn) Clone() any { return &RowFn{Q: f.Q, Keep: f.Keep} }

// Process implements contract.DoFn.
func (f *RowFn) Process(pc *contract.ProcessContext, e contract.Element) error {
	r, ok := row.AsRow(e.Value)
	if !ok {
		return &contract.ElementError{Reason: "type_mismatch", Message: fmt.Sprintf("Sql: expected a row, got %T", e.Value)}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ctx := pc.Context()
	if f.d == nil {
		d, err := f.Q.openPrepared(ctx)
		if err != nil {
			return err
		}
		f.d = d
		// The runner has no end-of-run call for a DoFn: the database goes
		// with the worker's copy.
		runtime.AddCleanup(f, func(d *db) { d.Close() }, d)
		f.rows = make([][]*row.Row, 1)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("Sql: %w", err)
	}
	f.rows[0] = append(f.rows[0][:0], r)
	// A per-row query reads its one row once and has no loop of its own
	// (Compile's classification: no recursion, sort or aggregate), so it
	// runs without a deadline: a context that can be cancelled makes the
	// driver start a goroutine per statement, most of a row's cost.
	out, err := f.Q.run(context.Background(), f.d, f.rows)
	f.rows[0][0] = nil
	if f.d.broken {
		// The next element opens a database afresh.
		f.d.Close()
		f.d = nil
	}
	if err != nil {
		if ctx.Err() != nil {
			// The run ends: not the element's failure.
			return fmt.Errorf("Sql: %w", ctx.Err())
		}
		return &contract.ElementError{Reason: ReasonSQLError, Message: "Sql: " + err.Error()}
	}
	if f.Keep {
		if len(out) > 0 {
			pc.Emit(0, e)
		}
		return nil
	}
	for _, o := range out {
		x := e
		x.Value = o
		pc.Emit(0, x)
	}
	return nil
}

// openPrepared opens a database with the query's tables and prepares the
// query on it.
func (q *Query) openPrepared(ctx context.Context) (*db, error) {
	d, err := q.open(ctx)
	if err != nil {
		return nil, err
	}
	if err := q.prepare(ctx, d); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// BatchSchema is the schema of an Aggregator's output: the result rows of
// one pane, or the error the query failed with.
func (q *Query) BatchSchema() *row.Schema {
	return row.MustSchema(
		row.Field{Name: "rows", Type: row.ListOf(row.RowOf(q.Out))},
		row.Field{Name: "error", Type: row.Of(row.KindString)},
	)
}

// Aggregator collects a window's rows per input (join.Aggregator's
// collection, keyed by the window alone, with its checkpoint state) and
// runs the query over them when the window's pane fires.
type Aggregator struct {
	*join.Aggregator
	Q *Query
	// Batch is Q.BatchSchema().
	Batch *row.Schema
	// dbs keeps the databases of panes that ran, emptied, for the next
	// panes: opening one (its tables, its statements) cost more than
	// running the query over a small pane's rows.
	dbs *dbPool
}

// dbPool holds idle databases of one query, at most max of them (the
// workers that may run a pane at once); the others are closed.
type dbPool struct {
	max  int
	mu   sync.Mutex // guards free; held only to take or put one
	free []*db
}

// take returns an idle database, or nil when there is none (or no pool:
// an Aggregator not made by NewAggregator).
func (p *dbPool) take() *db {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) == 0 {
		return nil
	}
	d := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	return d
}

// put keeps d for a later pane, or closes it when enough are idle.
func (p *dbPool) put(d *db) {
	if p == nil {
		d.Close()
		return
	}
	p.mu.Lock()
	if len(p.free) < p.max {
		p.free = append(p.free, d)
		d = nil
	}
	p.mu.Unlock()
	if d != nil {
		d.Close()
	}
}

// closeAll closes every idle database.
func (p *dbPool) closeAll() {
	p.mu.Lock()
	free := p.free
	p.free = nil
	p.mu.Unlock()
	for _, d := range free {
		d.Close()
	}
}

// NewAggregator returns the aggregation of query q; appendKeyValue is
// Combine's encoding of one key value (join.Aggregator.AppendKeyValue).
func NewAggregator(q *Query, appendKeyValue func(dst []byte, v any) []byte) *Aggregator {
	j := &join.Aggregator{AppendKeyValue: appendKeyValue}
	for _, t := range q.Tables {
		j.Ins = append(j.Ins, t.Schema)
	}
	a := &Aggregator{Aggregator: j, Q: q, Batch: q.BatchSchema(), dbs: &dbPool{max: runtime.GOMAXPROCS(0)}}
	// The runner has no end-of-run call for an aggregation: the idle
	// databases go with the aggregator.
	runtime.AddCleanup(a, func(p *dbPool) { p.closeAll() }, a.dbs)
	return a
}

// Output implements contract.Aggregator: OutputContext without a run's
// context.
func (a *Aggregator) Output(key any, acc any, w window.Window, p window.PaneInfo) any {
	return a.OutputContext(context.Background(), key, acc, w, p)
}

// OutputContext implements contract.ContextAggregator: the query's result
// over the pane's rows, or the error it failed with (EmitFn makes it a
// reject), within RunTimeout and ctx (a cancelled run ends the query).
func (a *Aggregator) OutputContext(ctx context.Context, _ any, acc any, _ window.Window, _ window.PaneInfo) any {
	tables := acc.(*join.Acc).Rows
	ctx, cancel := context.WithTimeout(ctx, RunTimeout)
	defer cancel()
	res, err := func() ([]*row.Row, error) {
		d := a.dbs.take()
		if d == nil {
			var err error
			if d, err = a.Q.openPrepared(ctx); err != nil {
				return nil, err
			}
		}
		res, err := a.Q.run(ctx, d, tables)
		if err != nil || d.broken {
			// Whatever failed may have left the database unusable.
			d.Close()
			return res, err
		}
		a.dbs.put(d)
		return res, nil
	}()
	if err != nil {
		n := 0
		for _, rs := range tables {
			n += len(rs)
		}
		return &row.Row{Schema: a.Batch, Values: []any{nil, fmt.Sprintf("%v (over the window's %d rows)", err, n)}}
	}
	rows := make([]any, len(res))
	for i, r := range res {
		rows[i] = r
	}
	return &row.Row{Schema: a.Batch, Values: []any{rows, nil}}
}

// EmitFn expands a pane's result into its rows, or makes it a reject when
// the query failed.
type EmitFn struct{}

// Process implements contract.DoFn.
func (EmitFn) Process(pc *contract.ProcessContext, e contract.Element) error {
	b, ok := e.Value.(*row.Row)
	if !ok || len(b.Values) != 2 {
		return &contract.ElementError{Reason: "type_mismatch", Message: fmt.Sprintf("Sql: expected a result batch, got %T", e.Value)}
	}
	if msg, _ := b.Values[1].(string); msg != "" {
		return &contract.ElementError{Reason: ReasonSQLError, Message: "Sql: " + msg}
	}
	rs, _ := b.Values[0].([]any)
	for _, r := range rs {
		o := e
		o.Value = r
		pc.Emit(0, o)
	}
	return nil
}
