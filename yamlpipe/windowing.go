package yamlpipe

import (
	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
	"math"
)

// windowing reads a windowing mapping into a strategy:
//
//	type: global|fixed|sliding|sessions, size, period, gap, offset,
//	allowed_lateness, accumulation_mode: accumulating|discarding,
//	trigger: {type, early, late, count, delay, trigger, triggers}
func (l *loader) windowing(n *yamlnode.Node) (window.Strategy, error) {
	var s window.Strategy
	if err := l.checkKeys(n, "windowing", "type", "size", "period", "gap", "offset", "allowed_lateness", "accumulation_mode", "trigger"); err != nil {
		return s, err
	}
	typ, tn, err := l.requireStr(n, "type", "windowing")
	if err != nil {
		return s, err
	}
	allowed := map[window.Kind][]string{
		window.KindGlobal:   {},
		window.KindFixed:    {"size", "offset"},
		window.KindSliding:  {"size", "period", "offset"},
		window.KindSessions: {"gap"},
	}
	kind := window.Kind(typ)
	keys, ok := allowed[kind]
	if !ok {
		return s, l.errf(tn, "unknown window type %q (want global, fixed, sliding or sessions)", typ)
	}
	for _, k := range []string{"size", "period", "gap", "offset"} {
		if n.Get(k) == nil {
			continue
		}
		found := false
		for _, a := range keys {
			found = found || a == k
		}
		if !found {
			return s, l.errf(n.KeyNode(k), "%s windows take no %s", typ, k)
		}
	}
	s.Fn.Kind = kind
	dur := func(key string, required bool) (mtime.Duration, error) {
		v := n.Get(key)
		if v == nil {
			if required {
				return 0, l.errf(tn, "%s windows need %s", typ, key)
			}
			return 0, nil
		}
		return l.duration(v, key)
	}
	if s.Fn.Size, err = dur("size", kind == window.KindFixed || kind == window.KindSliding); err != nil {
		return s, err
	}
	if s.Fn.Period, err = dur("period", kind == window.KindSliding); err != nil {
		return s, err
	}
	if s.Fn.Gap, err = dur("gap", kind == window.KindSessions); err != nil {
		return s, err
	}
	if s.Fn.Offset, err = dur("offset", false); err != nil {
		return s, err
	}
	if s.AllowedLateness, err = dur("allowed_lateness", false); err != nil {
		return s, err
	}
	if am := n.Get("accumulation_mode"); am != nil {
		m, err := l.str(am, "accumulation_mode")
		if err != nil {
			return s, err
		}
		switch window.AccumulationMode(m) {
		case window.Accumulating, window.Discarding:
			s.Accumulation = window.AccumulationMode(m)
		default:
			return s, l.errf(am, "unknown accumulation_mode %q (want accumulating or discarding)", m)
		}
	}
	if tr := n.Get("trigger"); tr != nil {
		if s.Trigger, err = l.trigger(tr); err != nil {
			return s, err
		}
	}
	s.EnsureDefaults()
	if err := s.Validate(); err != nil {
		return s, l.wrapf(n, err, "bad windowing")
	}
	return s, nil
}

// duration reads 300 (seconds), "300s", "5m", "1h".
func (l *loader) duration(n *yamlnode.Node, what string) (mtime.Duration, error) {
	text, err := l.str(n, what)
	if err != nil {
		return 0, err
	}
	d, err := mtime.ParseDuration(text)
	if err != nil {
		return 0, l.wrapf(n, err, "bad %s", what)
	}
	return d, nil
}

// trigger reads a trigger mapping (or a bare type name such as default).
func (l *loader) trigger(n *yamlnode.Node) (window.Trigger, error) {
	var t window.Trigger
	if n.Kind == yamlnode.String {
		n = &yamlnode.Node{Kind: yamlnode.Map, Line: n.Line, Col: n.Col, Keys: []*yamlnode.Node{{Kind: yamlnode.String, Text: "type", Line: n.Line, Col: n.Col}}, Vals: []*yamlnode.Node{n}}
	}
	if err := l.checkKeys(n, "trigger", "type", "early", "late", "count", "delay", "trigger", "triggers"); err != nil {
		return t, err
	}
	typ, tn, err := l.requireStr(n, "type", "trigger")
	if err != nil {
		return t, err
	}
	t.Kind = window.TriggerKind(typ)
	keys := map[window.TriggerKind][]string{
		window.TriggerDefault:             {},
		window.TriggerNever:               {},
		window.TriggerAfterWatermark:      {"early", "late"},
		window.TriggerAfterCount:          {"count"},
		window.TriggerAfterProcessingTime: {"delay"},
		window.TriggerRepeatedly:          {"trigger"},
		window.TriggerAfterAny:            {"triggers"},
		window.TriggerAfterAll:            {"triggers"},
	}
	allowed, ok := keys[t.Kind]
	if !ok {
		return t, l.errf(tn, "unknown trigger type %q (want default, after_watermark, after_count, after_processing_time, repeatedly, after_any, after_all or never)", typ)
	}
	for _, k := range n.Keys {
		if k.Text == "type" {
			continue
		}
		found := false
		for _, a := range allowed {
			found = found || a == k.Text
		}
		if !found {
			return t, l.errf(k, "a %s trigger takes no %s", typ, k.Text)
		}
	}
	sub := func(key string) (*window.Trigger, error) {
		v := n.Get(key)
		if v == nil {
			return nil, nil
		}
		st, err := l.trigger(v)
		if err != nil {
			return nil, err
		}
		return &st, nil
	}
	if t.Early, err = sub("early"); err != nil {
		return t, err
	}
	if t.Late, err = sub("late"); err != nil {
		return t, err
	}
	switch t.Kind {
	case window.TriggerAfterCount:
		cn := n.Get("count")
		if cn == nil {
			return t, l.errf(tn, "after_count needs a count")
		}
		if t.Count, err = l.integer(cn, "count"); err != nil {
			return t, err
		}
		if t.Count < 1 {
			return t, l.errf(cn, "after_count needs a count of at least 1")
		}
		if t.Count > math.MaxInt32 {
			return t, l.errf(cn, "after_count's count is at most %d (as Beam's elementCountAtLeast), not %d", math.MaxInt32, t.Count)
		}
	case window.TriggerAfterProcessingTime:
		dn := n.Get("delay")
		if dn == nil {
			return t, l.errf(tn, "after_processing_time needs a delay")
		}
		if t.Delay, err = l.duration(dn, "delay"); err != nil {
			return t, err
		}
	case window.TriggerRepeatedly:
		st, err := sub("trigger")
		if err != nil {
			return t, err
		}
		if st == nil {
			return t, l.errf(tn, "repeatedly needs the trigger it repeats")
		}
		t.Triggers = []window.Trigger{*st}
	case window.TriggerAfterAny, window.TriggerAfterAll:
		ts := n.Get("triggers")
		if ts == nil || ts.Kind != yamlnode.Seq || len(ts.Seq) == 0 {
			at := ts
			if at == nil {
				at = tn
			}
			return t, l.errf(at, "%s needs a non-empty triggers list", typ)
		}
		for _, e := range ts.Seq {
			st, err := l.trigger(e)
			if err != nil {
				return t, err
			}
			t.Triggers = append(t.Triggers, st)
		}
	}
	if err := t.Validate(); err != nil {
		return t, l.wrapf(n, err, "bad trigger")
	}
	return t, nil
}

// ---- collection helpers: dispatch on rows or rejects ----

func windowInto(s weir.Scope, name string, in *coll, ws window.Strategy, opts ...weir.StepOption) *coll {
	opts = append(opts, weir.WithCoder(in.schema.Coder()))
	if in.isReject {
		return &coll{schema: in.schema, isReject: true, rejects: weir.WindowInto(s, name, in.rejects, ws, opts...)}
	}
	return rowsColl(in.schema, weir.WindowInto(s, name, in.rows, ws, opts...))
}

func parDo(s weir.Scope, name string, in *coll, fn contract.DoFn, opts ...weir.StepOption) weir.PCollection[*rowT] {
	if in.isReject {
		return weir.ParDoFn[contract.Reject, *rowT](s, name, in.rejects, fn, opts...)
	}
	return weir.ParDoFn[*rowT, *rowT](s, name, in.rows, fn, opts...)
}

func sideView(name string, c *coll) weir.SideInput {
	if c.isReject {
		return weir.AsList(name, c.rejects)
	}
	return weir.AsList(name, c.rows)
}

func write(s weir.Scope, name string, in *coll, sink contract.Sink, opts ...weir.StepOption) {
	if in.isReject {
		weir.Write(s, name, in.rejects, sink, opts...)
		return
	}
	weir.Write(s, name, in.rows, sink, opts...)
}

// writeWithErrors adds the sink step of t, with its error output when t
// declares error_handling (registered as t's output NAME): the rows the sink
// cannot store go there as rejects of the sink step.
func (l *loader) writeWithErrors(t *transformSpec, in *coll, sink contract.Sink, opts ...weir.StepOption) {
	if t.errOut == "" {
		write(l.root, t.name, in, sink, opts...)
		return
	}
	opts = append(opts, errorOpt(t)...)
	var errs weir.PCollection[contract.Reject]
	if in.isReject {
		errs = weir.WriteWithErrors(l.root, t.name, in.rejects, sink, opts...)
	} else {
		errs = weir.WriteWithErrors(l.root, t.name, in.rows, sink, opts...)
	}
	if errs.Valid() {
		l.outs[t.name+"."+t.errOut] = &coll{schema: row.RejectSchema(), rejects: errs, isReject: true}
	}
}
