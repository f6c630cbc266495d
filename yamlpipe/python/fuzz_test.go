package python

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// FuzzBudgets runs arbitrary code of the dialect, as an expression or a
// callable, with the budgets on: it never panics, and every failure of a
// call is an element error (python_error, type_mismatch or
// expression_limit), never one that would stop the job. Seeds:
// testdata/fuzz/FuzzBudgets (among them each amplifier of budget.go).
func FuzzBudgets(f *testing.F) {
	for _, s := range []string{"'x' * n", "s.replace('', s)", "len(list(range(n)))", "'%s' % [s, s]",
		"def f(r):\n  x = [1]\n  for i in range(40):\n    x = [x, x]\n  return str(x)",
		"def f(r):\n  s = r.s\n  for i in range(30):\n    s += s\n  return s",
		"lambda r: '-'.join([r.s] * r.n)", "[c for c in s.elems()]", "n * 2 + 1"} {
		f.Add(s)
	}
	schema := row.MustSchema(row.Field{Name: "n", Type: row.Of(row.KindInt)}, row.Field{Name: "s", Type: row.Of(row.KindString)})
	r := &row.Row{Schema: schema, Values: []any{int64(100_000), strings.Repeat("ab", 5_000)}}
	f.Fuzz(func(t *testing.T, src string) {
		src = Prepare(src)
		var p *Program
		var err error
		if trimmed := strings.TrimSpace(src); strings.HasPrefix(trimmed, "lambda") || strings.HasPrefix(trimmed, "def") {
			p, err = CompileCallable("f.yaml", src, schema, nil)
		} else {
			p, err = CompileExpr("f.yaml", src, schema, nil)
		}
		if err != nil {
			return
		}
		pc := contract.NewProcessContext(context.Background(), nil, nil, nil, 0)
		_, err = p.NewEval().At(&pc).Eval(r, "fuzz")
		var ee *contract.ElementError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%q: a failure that is no element error: %v", src, err)
		}
	})
}
