package yamlpipe

import (
	"testing"
	"time"

	"github.com/weir-dev/weir/yamlpipe/celexpr"
	"github.com/weir-dev/weir/yamlpipe/genrows"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// benchExprs are the expressions the CEL and Python benchmarks evaluate,
// one per element, written in each language.
var benchExprs = []struct{ name, cel, py string }{
	{"filter", "amount > 10 && key != 'key-3'", "amount > 10 and key != 'key-3'"},
	{"arith", "amount * 2 + 1", "amount * 2 + 1"},
	{"string", "key + '-x'", "key + '-x'"},
}

// BenchmarkExprCELvsPython evaluates the same expressions per element
// through CEL (the fast path, with its native compilation where it has
// one) and through the Python dialect (Starlark), in one run, and reports
// each path's ns/elem and the ratio python/cel.
//
//	go test ./yamlpipe/ -run '^$' -bench ExprCELvsPython -benchtime 200000x
func BenchmarkExprCELvsPython(b *testing.B) {
	schema := genrows.Schema()
	sc, err := newCELScope(schema, nil)
	if err != nil {
		b.Fatal(err)
	}
	r := genrows.New(genrows.Config{Keys: 10, MaxAmount: 50, Spacing: 1}).NewRowMaker()(1)
	l := &loader{file: "bench.yaml"}
	for _, e := range benchExprs {
		b.Run(e.name, func(b *testing.B) {
			prg, typ, err := sc.Compile(e.cel)
			if err != nil {
				b.Fatal(err)
			}
			act := celexpr.NewActivation(sc)
			rt := celexpr.RowType(typ)
			py, err := l.compilePython(&coll{schema: schema}, &yamlnode.Node{Kind: yamlnode.String, Text: e.py, Line: 1, Col: 1}, e.name)
			if err != nil {
				b.Fatal(err)
			}
			pe := py.NewEval()
			b.ReportAllocs()
			var celD, pyD time.Duration
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				act.Reset(r, nil)
				if _, err := act.EvalValue(prg, rt); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := pe.Eval(r, e.name); err != nil {
					b.Fatal(err)
				}
				pyD += time.Since(t1)
				celD += t1.Sub(t0)
			}
			b.ReportMetric(float64(celD.Nanoseconds())/float64(b.N), "cel-ns/elem")
			b.ReportMetric(float64(pyD.Nanoseconds())/float64(b.N), "python-ns/elem")
			if celD > 0 {
				b.ReportMetric(float64(pyD)/float64(celD), "python/cel")
			}
		})
	}
}
