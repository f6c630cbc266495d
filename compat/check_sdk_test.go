package compat_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/window"
)

// sdkJob is the shape of the SDK cases; its fields select variants.
type sdkJob struct {
	topic     string // the source's topic
	keyString bool   // key clicks by string (default int64)
	mean      bool   // Mean instead of Sum in Totals
	// meanFrom, with mean, declares Totals' migration from a stored
	// accumulator of this type ("int64": Sum's, as the old job stores).
	meanFrom string
	count    bool // Count instead of Sum in Totals
	gbkFloat bool // group float64 values instead of int64
	lastSeen bool // declare value state last_seen as float64 (default int64)
	// lastSeenFrom, with lastSeen, declares last_seen's migration from a
	// stored value of this type ("int64": the old job's).
	lastSeenFrom string
	// bagFrom, with bagString, declares pending's migration from int64.
	bagFrom    bool
	bagString  bool   // buffer strings in the pending bag (default int64)
	noPending  bool   // drop the pending bag
	noFlush    bool   // drop the flush timer
	extraState bool   // declare one more state cell and timer
	gbkAsSum   bool   // Grouped is a combine instead of a group_by_key
	gbkString  bool   // Grouped groups by string keys
	sideInput  bool   // Enrich reads a side input
	prefix     string // composite holding the stateful step (default Parse)
	windowing  weir.Windowing
	names      map[string]string // renames of top-level steps
}

func (j sdkJob) name(n string) string {
	if r, ok := j.names[n]; ok {
		return r
	}
	return n
}

// build returns the graph of j: a Pub/Sub-like source, a stateless Enrich,
// a combine (Totals), a group_by_key (Grouped) and a stateful ParDo inside
// a composite (Parse/Dedupe), plus a ParseX/Count combine whose name
// shares a prefix with Parse but not a '/' boundary.
func (j sdkJob) build(t *testing.T) *graph.Pipeline {
	t.Helper()
	p := weir.NewPipeline()
	s := p.Root()
	topic := j.topic
	if topic == "" {
		topic = "topics/clicks"
	}
	clicks := weir.Read[int64](s, j.name("Clicks"), nil, false, weir.WithSourceIdentity("pubsub", topic, false))
	var sides []weir.StepOption
	if j.sideInput {
		view := weir.AsList("known", weir.Create(s, "Known", []int64{1, 2}))
		sides = append(sides, weir.WithSideInputs(view))
	}
	enriched := weir.Map(s, j.name("Enrich"), clicks, func(v int64) int64 { return v }, sides...)
	w := j.windowing
	if w.Fn.Kind == "" {
		w = weir.FixedWindows(mtime.Duration(60_000))
	}
	windowed := weir.WindowInto(s, "Window", enriched, w)
	if j.keyString {
		kv := weir.Map(s, "KeyByUser", windowed, func(v int64) weir.KV[string, int64] { return weir.KV[string, int64]{Value: v} })
		weir.CombinePerKey(s, j.name("Totals"), kv, weir.Sum[int64]())
	} else {
		kv := weir.Map(s, "KeyByUser", windowed, func(v int64) weir.KV[int64, int64] { return weir.KV[int64, int64]{Key: v, Value: v} })
		switch {
		case j.mean && j.meanFrom == "int64":
			weir.CombinePerKey(s, j.name("Totals"), kv, weir.Mean[int64](), weir.MigrateAccumulator(func(total int64) (weir.MeanAcc, error) {
				return weir.MeanAcc{Sum: float64(total), Count: 1}, nil
			}))
		case j.mean && j.meanFrom == "float64":
			weir.CombinePerKey(s, j.name("Totals"), kv, weir.Mean[int64](), weir.MigrateAccumulator(func(total float64) (weir.MeanAcc, error) {
				return weir.MeanAcc{Sum: total, Count: 1}, nil
			}))
		case j.mean:
			weir.CombinePerKey(s, j.name("Totals"), kv, weir.Mean[int64]())
		case j.count:
			weir.CombinePerKey(s, j.name("Totals"), kv, weir.Count[int64]())
		default:
			weir.CombinePerKey(s, j.name("Totals"), kv, weir.Sum[int64]())
		}
		if j.gbkFloat {
			fkv := weir.Map(s, "AsFloat", kv, func(v weir.KV[int64, int64]) weir.KV[int64, float64] {
				return weir.KV[int64, float64]{Key: v.Key, Value: float64(v.Value)}
			})
			weir.GroupByKey(s, "Grouped", fkv)
		} else if j.gbkString {
			skv := weir.Map(s, "KeyAsString", kv, func(v weir.KV[int64, int64]) weir.KV[string, int64] {
				return weir.KV[string, int64]{Value: v.Value}
			})
			weir.GroupByKey(s, "Grouped", skv)
		} else if j.gbkAsSum {
			weir.CombinePerKey(s, "Grouped", kv, weir.Sum[int64]())
		} else {
			weir.GroupByKey(s, "Grouped", kv)
		}
		prefix := j.prefix
		if prefix == "" {
			prefix = "Parse"
		}
		var state []weir.StateDecl
		if j.lastSeen {
			state = append(state, weir.ValueState[float64]{ID: "last_seen"})
		} else {
			state = append(state, weir.ValueState[int64]{ID: "last_seen"})
		}
		switch {
		case j.noPending:
		case j.bagString:
			state = append(state, weir.BagState[string]{ID: "pending"})
		default:
			state = append(state, weir.BagState[int64]{ID: "pending"})
		}
		timers := []weir.TimerSpec{}
		if !j.noFlush {
			timers = append(timers, weir.EventTimer("flush"))
		}
		if j.extraState {
			state = append(state, weir.MapState[string, int64]{ID: "seen"})
			timers = append(timers, weir.ProcessingTimer("expire"))
		}
		fn := weir.StatefulFn[int64, int64, int64]{State: state, Timers: timers,
			Process: func(*weir.StateContext[int64, int64], int64) error { return nil }}
		var sopts []weir.StepOption
		switch j.lastSeenFrom {
		case "int64":
			sopts = append(sopts, weir.MigrateState("last_seen", func(ms int64) (float64, error) { return float64(ms), nil }))
		case "string":
			sopts = append(sopts, weir.MigrateState("last_seen", func(v string) (float64, error) { return strconv.ParseFloat(v, 64) }))
		}
		if j.bagFrom {
			sopts = append(sopts, weir.MigrateState("pending", func(v int64) (string, error) { return strconv.FormatInt(v, 10), nil }))
		}
		weir.StatefulParDo(s.Sub(prefix), "Dedupe", kv, fn, sopts...)
		weir.CombinePerKey(s.Sub("ParseX"), "Count", kv, weir.Count[int64]())
	}
	if err := p.Err(); err != nil {
		t.Fatalf("building the pipeline: %v", err)
	}
	return p.Graph()
}

// TestCheckSDK runs the rules over graphs built with the Go SDK.
func TestCheckSDK(t *testing.T) {
	fixed := func(ms int64) weir.Windowing { return weir.FixedWindows(mtime.Duration(ms)) }
	withTrigger := func(w weir.Windowing, tr window.Trigger) weir.Windowing { w.Trigger = tr; return w }
	tests := []struct {
		name     string
		old, new sdkJob
		mapping  string
		allow    bool
		want     want
	}{
		{name: "unchanged", want: want{compatible: true,
			matches: []string{"Clicks->Clicks", "Grouped->Grouped", "Parse/Dedupe->Parse/Dedupe", "ParseX/Count->ParseX/Count", "Totals->Totals"}}},
		{name: "key type changed", new: sdkJob{keyString: true},
			// Without int64 keys the other keyed steps are gone too.
			want: want{errors: []string{"Grouped STEP_MISSING", "Parse/Dedupe STEP_MISSING", "ParseX/Count STEP_MISSING", "Totals KEY_CODER_CHANGED"}}},
		{name: "accumulator sum to mean", new: sdkJob{mean: true},
			want: want{errors: []string{"Totals STATE_CODER_CHANGED"}, text: []string{"accumulator changed from weir:coder:go:int64 to weir:coder:go:weir.MeanAcc{"}}},
		{name: "accumulator sum to mean, migration declared", new: sdkJob{mean: true, meanFrom: "int64"},
			want: want{compatible: true, warnings: []string{"Totals ACCUMULATOR_MIGRATED"}, text: []string{"declares the migration from weir:coder:go:int64"},
				matches: []string{"Clicks->Clicks", "Grouped->Grouped", "Parse/Dedupe->Parse/Dedupe", "ParseX/Count->ParseX/Count", "Totals->Totals"}}},
		{name: "accumulator sum to mean, migration from another type", new: sdkJob{mean: true, meanFrom: "float64"},
			want: want{errors: []string{"Totals STATE_CODER_CHANGED"}, text: []string{"declares a migration from weir:coder:go:float64, but the running step stores weir:coder:go:int64"}}},
		{name: "accumulator sum to mean, the fix names the migration", new: sdkJob{mean: true},
			want: want{errors: []string{"Totals STATE_CODER_CHANGED"}, text: []string{"weir.MigrateAccumulator"}}},
		// A sum and a count both store an int64, but the stored coder names the
		// combine function, so the accumulator's meaning change is caught.
		{name: "combine fn changed, same accumulator type", new: sdkJob{count: true},
			want: want{errors: []string{"Totals STATE_CODER_CHANGED"}}},
		{name: "grouped values changed", new: sdkJob{gbkFloat: true},
			want: want{errors: []string{"Grouped BUFFERED_ELEMENT_CHANGED"}, text: []string{"buffered values from weir:coder:list<weir:coder:go:int64> to weir:coder:list<weir:coder:go:float64>"}}},
		{name: "grouped key changed, values not", new: sdkJob{gbkString: true},
			want: want{errors: []string{"Grouped KEY_CODER_CHANGED"}}},
		{name: "group_by_key became a combine", new: sdkJob{gbkAsSum: true},
			want: want{errors: []string{"Grouped STEP_KIND_CHANGED"}}},
		{name: "value state coder changed", new: sdkJob{lastSeen: true},
			want: want{errors: []string{"Parse/Dedupe STATE_CODER_CHANGED"}, text: []string{`value state "last_seen"`}}},
		{name: "value state coder changed, the fix names the migration", new: sdkJob{lastSeen: true},
			want: want{errors: []string{"Parse/Dedupe STATE_CODER_CHANGED"}, text: []string{"weir.MigrateState"}}},
		{name: "value state coder changed, migration declared", new: sdkJob{lastSeen: true, lastSeenFrom: "int64"},
			want: want{compatible: true, warnings: []string{"Parse/Dedupe STATE_MIGRATED"}, text: []string{`value state "last_seen" changed from weir:coder:go:int64 to weir:coder:go:float64, and the step declares the migration from weir:coder:go:int64`},
				matches: []string{"Clicks->Clicks", "Grouped->Grouped", "Parse/Dedupe->Parse/Dedupe", "ParseX/Count->ParseX/Count", "Totals->Totals"}}},
		{name: "value state coder changed, migration from another type", new: sdkJob{lastSeen: true, lastSeenFrom: "string"},
			want: want{errors: []string{"Parse/Dedupe STATE_CODER_CHANGED"}, text: []string{`declares a migration of state "last_seen" from weir:coder:go:string, but the running step stores weir:coder:go:int64`}}},
		{name: "bag state elements changed, migration declared", new: sdkJob{bagString: true, bagFrom: true},
			want: want{compatible: true, warnings: []string{"Parse/Dedupe STATE_MIGRATED"},
				matches: []string{"Clicks->Clicks", "Grouped->Grouped", "Parse/Dedupe->Parse/Dedupe", "ParseX/Count->ParseX/Count", "Totals->Totals"}}},
		{name: "bag state elements changed", new: sdkJob{bagString: true},
			want: want{errors: []string{"Parse/Dedupe BUFFERED_ELEMENT_CHANGED"}}},
		{name: "state cell removed", new: sdkJob{noPending: true},
			want: want{errors: []string{"Parse/Dedupe STATE_SPEC_CHANGED"}, text: []string{`bag state "pending"`, "is gone"}}},
		{name: "timer removed", new: sdkJob{noFlush: true},
			want: want{errors: []string{"Parse/Dedupe STATE_SPEC_CHANGED"}, text: []string{"pending timers would never fire"}}},
		{name: "state cell and timer added", new: sdkJob{extraState: true}, want: want{compatible: true}},
		{name: "window size changed",
			new:  sdkJob{windowing: fixed(120_000)},
			want: want{compatible: true, warnings: []string{"Grouped WINDOW_PARAMS_CHANGED", "Parse/Dedupe WINDOW_PARAMS_CHANGED", "ParseX/Count WINDOW_PARAMS_CHANGED", "Totals WINDOW_PARAMS_CHANGED"}}},
		{name: "window fn changed to sliding", new: sdkJob{windowing: weir.SlidingWindows(120_000, 60_000)},
			want: want{errors: []string{"Grouped WINDOW_FN_CHANGED", "Parse/Dedupe WINDOW_FN_CHANGED", "ParseX/Count WINDOW_FN_CHANGED", "Totals WINDOW_FN_CHANGED"}}},
		{name: "trigger delay changed",
			old:  sdkJob{windowing: withTrigger(fixed(60_000), window.Repeatedly(window.AfterProcessingTime(1000)))},
			new:  sdkJob{windowing: withTrigger(fixed(60_000), window.Repeatedly(window.AfterProcessingTime(5000)))},
			want: want{compatible: true, warnings: []string{"Grouped WINDOW_PARAMS_CHANGED", "Parse/Dedupe WINDOW_PARAMS_CHANGED", "ParseX/Count WINDOW_PARAMS_CHANGED", "Totals WINDOW_PARAMS_CHANGED"}, text: []string{"trigger.0 delay from 1s to 5s"}}},
		{name: "trigger kind changed",
			old:  sdkJob{windowing: withTrigger(fixed(60_000), window.Repeatedly(window.AfterCount(10)))},
			new:  sdkJob{windowing: withTrigger(fixed(60_000), window.Repeatedly(window.AfterProcessingTime(5000)))},
			want: want{errors: []string{"Grouped TRIGGER_CHANGED", "Parse/Dedupe TRIGGER_CHANGED", "ParseX/Count TRIGGER_CHANGED", "Totals TRIGGER_CHANGED"}}},
		{name: "side input added to a stateless step", new: sdkJob{sideInput: true},
			want: want{errors: []string{"Enrich SIDE_INPUTS_CHANGED"}}},
		{name: "side input removed from a stateless step", old: sdkJob{sideInput: true},
			// Known, a Create feeding only the side input, goes too: its (bounded) positions are dropped on purpose.
			mapping: `{"Known":""}`,
			want:    want{errors: []string{"Enrich SIDE_INPUTS_CHANGED"}, warnings: []string{"Known SOURCE_POSITIONS_DROPPED"}, dropped: []string{"Known"}}},
		{name: "topic changed", new: sdkJob{topic: "topics/clicks-v2"},
			want: want{errors: []string{"Clicks SOURCE_CHANGED"}, text: []string{"pubsub topics/clicks", "pubsub topics/clicks-v2"}}},
		{name: "topic changed, allowed", new: sdkJob{topic: "topics/clicks-v2"}, allow: true,
			want: want{compatible: true, warnings: []string{"Clicks SOURCE_POSITIONS_DROPPED"}, dropped: []string{"Clicks"}}},
		{name: "source gone, allowed", new: sdkJob{names: map[string]string{"Clicks": "Taps"}, topic: "topics/taps"}, allow: true,
			want: want{compatible: true, warnings: []string{"Clicks SOURCE_POSITIONS_DROPPED"}, dropped: []string{"Clicks"}}},
		{name: "source renamed with a mapping", new: sdkJob{names: map[string]string{"Clicks": "Taps"}}, mapping: `{"Clicks":"Taps"}`,
			want: want{compatible: true}},

		// Prefix mappings on '/' boundaries.
		{name: "composite renamed without a mapping", new: sdkJob{prefix: "Ingest"},
			want: want{errors: []string{"Parse/Dedupe STEP_MISSING"}, text: []string{`Ingest/Dedupe has the same kind, coders and windowing — add --transform-name-mapping '{"Parse/Dedupe":"Ingest/Dedupe"}'`}}},
		{name: "composite renamed by prefix", new: sdkJob{prefix: "Ingest"}, mapping: `{"Parse":"Ingest"}`,
			want: want{compatible: true, matches: []string{"Clicks->Clicks", "Grouped->Grouped", "Parse/Dedupe->Ingest/Dedupe", "ParseX/Count->ParseX/Count", "Totals->Totals"}}},
		{name: "prefix mapping leaves ParseX alone", new: sdkJob{prefix: "Ingest"}, mapping: `{"Parse":"Ingest","ParseX":"ParseX"}`,
			want: want{compatible: true, matches: []string{"Clicks->Clicks", "Grouped->Grouped", "Parse/Dedupe->Ingest/Dedupe", "ParseX/Count->ParseX/Count", "Totals->Totals"}}},

		// Mapping errors.
		{name: "two old steps map to one new step", new: sdkJob{names: map[string]string{"Totals": "Sums"}}, mapping: `{"Totals":"Sums","ParseX/Count":"Sums"}`,
			want: want{errors: []string{"Sums MAPPING_CONFLICT"}, text: []string{`steps ParseX/Count (mapped by "ParseX/Count"), Totals (mapped by "Totals") of the running pipeline all map to step Sums`}}},
		{name: "a mapping onto a step that keeps its name", mapping: `{"ParseX/Count":"Totals"}`,
			want: want{errors: []string{"Totals MAPPING_CONFLICT"}, text: []string{"Totals (its own name)"}}},
		{name: "mapping names an unknown step", mapping: `{"Parse/Dedup":"Parse/Dedupe"}`,
			want: want{errors: []string{"Parse/Dedup MAPPING_UNKNOWN_STEP"}}},
		{name: "mapping a composite to the empty string", new: sdkJob{prefix: "Other"}, mapping: `{"Parse":""}`,
			want: want{compatible: true, warnings: []string{"Parse/Dedupe STATE_DROPPED"}, dropped: []string{"Parse/Dedupe"}, text: []string{`value state "last_seen" weir:coder:go:int64`, `bag state "pending"`, `pending event-time timers "flush"`}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := compat.ParseMapping(tc.mapping)
			if err != nil {
				t.Fatal(err)
			}
			tc.want.check(t, compat.Check(tc.old.build(t), tc.new.build(t), compat.Options{Mapping: m, AllowSourceChange: tc.allow}))
		})
	}
}

// TestCheckDeterministic checks that the report does not depend on the
// order of steps and collections in the graphs, nor on map iteration.
func TestCheckDeterministic(t *testing.T) {
	old := sdkJob{}.build(t)
	newp := sdkJob{keyString: true, topic: "topics/other", prefix: "Ingest", mean: true}.build(t)
	m, err := compat.ParseMapping(`{"Parse":"Ingest","Enrich":"Missing","Grouped":""}`)
	if err != nil {
		t.Fatal(err)
	}
	first, err := json.Marshal(compat.Check(old, newp, compat.Options{Mapping: m}))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20 {
		for _, g := range []*graph.Pipeline{old, newp} {
			rng.Shuffle(len(g.Steps), func(a, b int) { g.Steps[a], g.Steps[b] = g.Steps[b], g.Steps[a] })
			rng.Shuffle(len(g.Collections), func(a, b int) { g.Collections[a], g.Collections[b] = g.Collections[b], g.Collections[a] })
		}
		got, err := json.Marshal(compat.Check(old, newp, compat.Options{Mapping: m}))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, first) {
			t.Fatalf("run %d differs:\n%s\nvs\n%s", i, got, first)
		}
	}
}

// TestReportJSON checks the JSON shape `weir check --format json` prints:
// the documented keys, and empty lists rather than nulls.
func TestReportJSON(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new *graph.Pipeline
	}{
		{"empty graphs", nil, nil},
		{"incompatible", sdkJob{}.build(t), sdkJob{mean: true}.build(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(compat.Check(tc.old, tc.new, compat.Options{}))
			if err != nil {
				t.Fatal(err)
			}
			var top map[string]json.RawMessage
			if err := json.Unmarshal(b, &top); err != nil {
				t.Fatal(err)
			}
			if keys := slices.Sorted(maps.Keys(top)); !slices.Equal(keys, []string{"compatible", "dropped_state", "errors", "matches", "warnings"}) {
				t.Errorf("keys = %v", keys)
			}
			for _, k := range []string{"errors", "warnings", "dropped_state", "matches"} {
				if string(top[k]) == "null" {
					t.Errorf("%s is null, want a list", k)
				}
			}
			var errs []map[string]any
			if err := json.Unmarshal(top["errors"], &errs); err != nil {
				t.Fatal(err)
			}
			for _, e := range errs {
				if keys := slices.Sorted(maps.Keys(e)); !slices.Equal(keys, []string{"code", "fix", "reason", "step"}) {
					t.Errorf("error keys = %v", keys)
				}
			}
		})
	}
}
