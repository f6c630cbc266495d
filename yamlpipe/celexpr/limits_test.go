package celexpr

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"cel.dev/cel-go/cel"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// An expression that computes too much for one element fails that element
// with reason expression_limit, naming the budget, instead of taking the
// process's memory (the probe of issue 22: lists.range(n).map(...) with
// n = 1,000,000 took a server to 3 GiB).
func TestBudgets(t *testing.T) {
	schema := row.MustSchema(row.Field{Name: "n", Type: row.Of(row.KindInt)}, row.Field{Name: "s", Type: row.Of(row.KindString)},
		row.Field{Name: "big", Type: row.Of(row.KindString)})
	big := strings.Repeat("x", 10_000)
	sc, err := NewScope(schema, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, expr string
		n          int64
		limit      string // "" for no error
	}{
		{"issue probe", "lists.range(n).map(x, lists.range(1000)).size()", 1_000_000, "cel_cost"},
		{"many lists", "lists.range(n).map(x, lists.range(100)).size()", 20_000, "cel_cost"},
		{"nested loops", "lists.range(n).all(i, lists.range(n).all(j, i + j >= 0))", 5_000, "cel_cost"},
		{"long strings", "lists.range(n).map(x, s + s + s + s).size()", 100_000, "cel_memory"},
		{"replace amplification", "big.replace('', big).size()", 0, "cel_string_bytes"},
		{"replace", "big.replace('x', 'yy').size() == 20000", 0, ""},
		{"small loop", "lists.range(n).map(x, x * 2).size() == n", 1_000, ""},
		{"plain", "n * 2 + size(s)", 1_000_000, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, typ, err := sc.Compile(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			act := NewActivation(sc)
			pc := contract.NewProcessContext(context.Background(), nil, nil, nil, 0)
			act.Reset(&row.Row{Schema: schema, Values: []any{tc.n, "0123456789abcdef", big}}, &pc)
			_, err = act.EvalValue(p, RowType(typ))
			var le *LimitError
			switch {
			case tc.limit == "" && err != nil:
				t.Fatalf("err = %v, want none", err)
			case tc.limit != "" && (!errors.As(err, &le) || le.Limit != tc.limit):
				t.Fatalf("err = %v, want the %s budget", err, tc.limit)
			case tc.limit != "":
				ee := EvalError("field x", err)
				var el *contract.ElementError
				if !errors.As(ee, &el) || el.Reason != ReasonLimit {
					t.Fatalf("EvalError = %#v, want reason %s", ee, ReasonLimit)
				}
			}
		})
	}
}

// Cancelling the run interrupts an expression stuck in a comprehension:
// the evaluation returns an error wrapping the context's, which the
// executor takes for the end of the run, not for a rejected element.
func TestCancelInterruptsComprehension(t *testing.T) {
	schema := row.MustSchema(row.Field{Name: "n", Type: row.Of(row.KindInt)})
	// Without the budgets, so that only the cancellation can stop it.
	sc, err := NewScope(schema, nil, nil, cel.CostLimit(math.MaxUint64), cel.MemoryLimit(math.MaxUint32))
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := sc.Compile("lists.range(n).all(i, lists.range(n).all(j, i + j >= 0))")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	act := NewActivation(sc)
	pc := contract.NewProcessContext(ctx, nil, nil, nil, 0)
	act.Reset(&row.Row{Schema: schema, Values: []any{int64(1_000_000)}}, &pc)
	done := make(chan error, 1)
	go func() {
		_, err := act.EvalBool(p)
		done <- err
	}()
	cancel()
	err = <-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want one wrapping context.Canceled", err)
	}
	if got := EvalError("keep", err); !errors.Is(got, context.Canceled) {
		t.Fatalf("EvalError made %v of the interruption", got)
	}
}

// The cost budget is per evaluation: a worker evaluating a cost-tracked
// expression over many elements never runs out of it (a job computing
// 'key-' + string(id % n) failed every element after about a million rows
// when the worker's reused frame kept one tracker for all of them).
func TestBudgetIsPerElement(t *testing.T) {
	schema := row.MustSchema(row.Field{Name: "id", Type: row.Of(row.KindInt)}, row.Field{Name: "s", Type: row.Of(row.KindString)})
	sc, err := NewScope(schema, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, typ, err := sc.Compile("'key-' + string(id % 1000) + s.upperAscii()")
	if err != nil {
		t.Fatal(err)
	}
	act := NewActivation(sc)
	pc := contract.NewProcessContext(context.Background(), nil, nil, nil, 0)
	s := strings.Repeat("x", 200)
	// Each evaluation costs a few tens; CostLimit of them would exhaust a
	// budget shared across evaluations many times over.
	for i := int64(0); i < 200_000; i++ {
		act.Reset(&row.Row{Schema: schema, Values: []any{i, s}}, &pc)
		if _, err := act.EvalValue(p, RowType(typ)); err != nil {
			t.Fatalf("element %d: %v", i, err)
		}
	}
}
