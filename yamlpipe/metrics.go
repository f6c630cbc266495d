package yamlpipe

import (
	"cel.dev/cel-go/common/types"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/yamlpipe/celexpr"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// User-defined metrics of MapToFields and Filter (a weir extension of Beam
// YAML, as the Go SDK's Counter and Distribution):
//
//	config:
//	  metrics:
//	    big_orders: {counter: "amount > 100"}   # elements it holds for
//	    units: {counter: quantity}               # the sum of an integer
//	    amount_dist: {distribution: amount}      # count, sum, min, max
//
// Each expression is CEL over the step's input row (whatever the step's
// language), evaluated once per input element before the step's own
// expressions; a null value counts nothing. The namespace is the step's
// name unless the metric says another (namespace: NAME).

// stepMetric is one metric of a metrics: config.
type stepMetric struct {
	name    contract.MetricName
	dist    bool
	boolean bool // a counter of a boolean expression counts the elements it holds for
	prg     *celexpr.Program
	what    string
}

// parseMetrics compiles the metrics: of transform t over scope sc.
func (l *loader) parseMetrics(t *transformSpec, sc *celexpr.Scope) ([]stepMetric, error) {
	mn := t.config.Get("metrics")
	if mn == nil || mn.Kind == yamlnode.Null {
		return nil, nil
	}
	if mn.Kind != yamlnode.Map {
		return nil, l.errf(mn, "metrics must map metric names to {counter: EXPR} or {distribution: EXPR}, not %s", mn.Kind)
	}
	var out []stepMetric
	for i, k := range mn.Keys {
		v := mn.Vals[i]
		what := "metric " + k.Text
		if v.Kind != yamlnode.Map {
			return nil, l.errf(v, "%s must be {counter: EXPR} or {distribution: EXPR}, not %s", what, v.Kind)
		}
		if err := l.checkKeys(v, what, "counter", "distribution", "namespace"); err != nil {
			return nil, err
		}
		cn, dn := v.Get("counter"), v.Get("distribution")
		if (cn == nil) == (dn == nil) {
			return nil, l.errf(v, "%s needs exactly one of counter: EXPR (a boolean counts the elements it holds for, an integer is summed) and distribution: EXPR (an integer)", what)
		}
		m := stepMetric{name: contract.MetricName{Namespace: t.name, Name: k.Text}, dist: dn != nil, what: what}
		if ns := v.Get("namespace"); ns != nil {
			s, err := l.str(ns, what+" namespace")
			if err != nil {
				return nil, err
			}
			m.name.Namespace = s
		}
		en := cn
		if m.dist {
			en = dn
		}
		prg, typ, err := l.compileExpr(sc, en, what)
		if err != nil {
			return nil, err
		}
		switch typ.Kind() {
		case types.BoolKind:
			if m.dist {
				return nil, l.errf(en, "%s: a distribution records integers; %q is a boolean (use counter: to count the elements it holds for)", what, en.Text)
			}
			m.boolean = true
		case types.IntKind, types.UintKind, types.DynKind, types.AnyKind:
		default:
			return nil, l.errf(en, "%s must be a boolean or an integer expression; %q has type %s", what, en.Text, typ)
		}
		m.prg = prg
		out = append(out, m)
	}
	return out, nil
}

// evalMetrics updates the step's metrics for the row act was reset to.
func evalMetrics(ms []stepMetric, act *celexpr.Activation, pc *contract.ProcessContext) error {
	um := pc.Metrics()
	if um == nil {
		return nil
	}
	for i := range ms {
		m := &ms[i]
		if m.boolean {
			b, err := act.EvalBool(m.prg)
			if err != nil {
				return celexpr.EvalError(m.what, err)
			}
			if b {
				um.Inc(m.name, 1)
			}
			continue
		}
		v, err := act.EvalValue(m.prg, row.Of(row.KindInt))
		if err != nil {
			return celexpr.EvalError(m.what, err)
		}
		n, ok := v.(int64)
		if !ok {
			continue // null: nothing to count
		}
		if m.dist {
			um.Update(m.name, n)
		} else {
			um.Inc(m.name, n)
		}
	}
	return nil
}
