package python

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

var budgetSchema = row.MustSchema(
	row.Field{Name: "n", Type: row.Of(row.KindInt)},
	row.Field{Name: "s", Type: row.Of(row.KindString)},
)

// compileForTest compiles src as an expression, or as a callable when it
// starts with lambda or def.
func compileForTest(t *testing.T, src string) *Program {
	t.Helper()
	src = Prepare(src)
	var p *Program
	var err error
	if strings.HasPrefix(src, "lambda") || strings.HasPrefix(src, "def") {
		p, err = CompileCallable("t.yaml", src, budgetSchema, nil)
	} else {
		p, err = CompileExpr("t.yaml", src, budgetSchema, nil)
	}
	if err != nil {
		t.Fatalf("compiling %q: %v", src, err)
	}
	return p
}

// Code that would build more than a call's budget in one element fails
// that element with reason expression_limit, naming the budget, before it
// builds it; code within the budgets behaves as Python does.
func TestBudgets(t *testing.T) {
	big := strings.Repeat("y", 100_000)
	tests := []struct {
		name, src string
		want      any    // the result, when within the budgets
		limit     string // the budget passed, else ""
	}{
		{"repeat", "'x' * n", nil, "python_alloc_bytes"},
		{"list repeat", "len([0] * n)", nil, "python_alloc_bytes"},
		{"doubling", "def f(r):\n  s = 'x'\n  for i in range(40):\n    s = s + s\n  return len(s)", nil, "python_alloc_bytes"},
		{"doubling in place", "def f(r):\n  s = 'x'\n  for i in range(40):\n    s += s\n  return len(s)", nil, "python_alloc_bytes"},
		{"list of a range", "len(list(range(n)))", nil, "python_alloc_bytes"},
		{"sorted range", "len(sorted(range(n)))", nil, "python_alloc_bytes"},
		{"extend", "def f(r):\n  l = []\n  l.extend(range(r.n))\n  return len(l)", nil, "python_alloc_bytes"},
		{"replace", "s.replace('', s)", nil, "python_alloc_bytes"},
		{"join", "len(s.join([s] * 2000))", nil, "python_alloc_bytes"},
		{"str of shared lists", "def f(r):\n  x = [1]\n  for i in range(40):\n    x = [x, x]\n  return len(str(x))", nil, "python_alloc_bytes"},
		{"format of shared lists", "def f(r):\n  x = [1]\n  for i in range(40):\n    x = [x, x]\n  return len('%s' % x) + len('{}'.format(x))", nil, "python_alloc_bytes"},
		{"json of shared lists", "def f(r):\n  x = [1]\n  for i in range(40):\n    x = [x, x]\n  return len(json.encode(x))", nil, "python_alloc_bytes"},
		{"shared lists as the result", "def f(r):\n  x = [1]\n  for i in range(40):\n    x = [x, x]\n  return x", nil, "python_alloc_bytes"},
		{"endless loop", "def f(r):\n  i = 0\n  while True:\n    i += 1\n  return i", nil, "python_steps"},
		{"repeat within", "'ab' * 3", "ababab", ""},
		{"arithmetic", "n * 2 + 1", int64(2_000_000_001), ""},
		{"list += in place", "def f(r):\n  a = [1]\n  b = a\n  a += [2]\n  return len(b)", int64(2), ""},
		{"comprehension", "len([x * 2 for x in range(1000)])", int64(1000), ""},
		{"format", "'%s-%d' % ('a', 3) + '{}{}'.format('b', 4)", "a-3b4", ""},
		{"replace within", "'banana'.replace('a', 'o')", "bonono", ""},
		{"join within", "'-'.join(['a', 'b'])", "a-b", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := compileForTest(t, tc.src)
			pc := contract.NewProcessContext(context.Background(), nil, nil, nil, 0)
			r := &row.Row{Schema: budgetSchema, Values: []any{int64(1_000_000_000), big}}
			if tc.limit == "" {
				r.Values[0] = int64(1_000_000_000)
			}
			got, err := p.NewEval().At(&pc).Eval(r, "field x")
			if tc.limit == "" {
				if err != nil || got != tc.want {
					t.Fatalf("= %#v, %v; want %#v", got, err, tc.want)
				}
				return
			}
			var ee *contract.ElementError
			if !errors.As(err, &ee) || ee.Reason != ReasonLimit || !strings.Contains(ee.Message, tc.limit) {
				t.Fatalf("err = %v, want reason %s naming %s", err, ReasonLimit, tc.limit)
			}
		})
	}
}

// Cancelling the run stops a call stuck in a loop: the error wraps the
// context's, which the executor takes for the end of the run.
func TestCancelStopsLoop(t *testing.T) {
	p := compileForTest(t, "def f(r):\n  i = 0\n  while True:\n    i += 1\n  return i")
	ctx, cancel := context.WithCancel(context.Background())
	pc := contract.NewProcessContext(ctx, nil, nil, nil, 0)
	done := make(chan error, 1)
	go func() {
		_, err := p.NewEval().At(&pc).Eval(&row.Row{Schema: budgetSchema, Values: []any{int64(1), ""}}, "keep")
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want one wrapping context.Canceled", err)
	}
}
