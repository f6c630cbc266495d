package yamlpipe

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
	"github.com/weir-dev/weir/yamlpipe/combine"
)

// A Combine whose group_by fields are scalars lets the runner keep only
// its keys' encodings (contract.EncodedKeyer). These tests hold it to what
// that promises: the key decoded from an encoding is the key, and the
// checkpoint bytes are those written from the values, so that checkpoints
// and handovers cannot tell the two ways of keeping keys apart.

const keysPipeline = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: In
      config:
        topic: orders
        schema: {s: string, i: int, f: float, b: bool, t: timestamp, amount: int}
        timestamp_field: t
    - type: Combine
      name: Sums
      input: In
      windowing: {type: fixed, size: 1h}
      config:
        group_by: [%s]
        combine: {total: {value: amount, fn: sum}, n: {value: amount, fn: count}}
    - type: WriteToJson
      name: Out
      input: Sums
      config: {path: out.jsonl}
`

// keysAggregator loads keysPipeline grouped by the fields groupBy and
// returns its Combine's aggregator and the source's schema.
func keysAggregator(t *testing.T, groupBy string) (*combine.Aggregator, *row.Schema) {
	t.Helper()
	dir := t.TempDir()
	job := &JobEnv{Name: "keys", ID: "job-keys", Generation: 1, DataDir: dir, Broker: ordersBroker(t, dir)}
	p, err := Load("p.yaml", []byte(fmt.Sprintf(keysPipeline, groupBy)), Options{BaseDir: dir, Job: job})
	if err != nil {
		t.Fatal(err)
	}
	a, ok := p.Program().Code["Sums"].(*combine.Aggregator)
	if !ok {
		t.Fatalf("step Sums has code %T", p.Program().Code["Sums"])
	}
	schema, err := row.NewSchema(
		row.Field{Name: "s", Type: row.Of(row.KindString)}, row.Field{Name: "i", Type: row.Of(row.KindInt)},
		row.Field{Name: "f", Type: row.Of(row.KindFloat)}, row.Field{Name: "b", Type: row.Of(row.KindBool)},
		row.Field{Name: "t", Type: row.Of(row.KindTimestamp)}, row.Field{Name: "amount", Type: row.Of(row.KindInt)})
	if err != nil {
		t.Fatal(err)
	}
	for j, name := range strings.Split(groupBy, ",") {
		if want := schema.Index(strings.TrimSpace(name)); a.Group[j] != want {
			t.Fatalf("group_by field %d (%s) is input field %d, the test's schema says %d", j, name, a.Group[j], want)
		}
	}
	return a, schema
}

func TestCombineKeyFromEncoding(t *testing.T) {
	long := strings.Repeat("ж", 200) // a length whose uvarint takes two bytes
	values := []map[string]any{
		{"s": "NORTH", "i": int64(7), "f": 1.5, "b": true, "t": mtime.Time(1767225600000)},
		{"s": "", "i": int64(-1), "f": math.Copysign(0, -1), "b": false, "t": mtime.Time(-5)},
		{"s": long, "i": int64(math.MaxInt64), "f": math.Inf(-1), "b": true, "t": mtime.MaxTimestamp},
		{"s": nil, "i": nil, "f": nil, "b": nil, "t": nil},
		{"s": "a\x00b", "i": int64(math.MinInt64), "f": math.SmallestNonzeroFloat64, "b": nil, "t": mtime.Time(0)},
	}
	for _, groupBy := range []string{"s", "i", "s, i, f, b, t", "b, s"} {
		t.Run(groupBy, func(t *testing.T) {
			a, schema := keysAggregator(t, groupBy)
			if !a.KeysFromEncoding() {
				t.Fatalf("group_by [%s] are scalars: the keys should be kept as encodings", groupBy)
			}
			for _, vals := range values {
				r := row.New(schema)
				for name, v := range vals {
					r.Values[schema.Index(name)] = v
				}
				enc := string(a.AppendKey(nil, r))
				key, err := a.KeyFromEncoding(enc)
				if err != nil {
					t.Fatalf("%v: %v", vals, err)
				}
				if want := a.Key(r); !reflect.DeepEqual(key, want) {
					t.Errorf("%v: key %#v from its encoding, want %#v", vals, key, want)
				}
				wantKey, err := a.EncodeKey(a.Key(r))
				if err != nil {
					t.Fatal(err)
				}
				if got, _ := a.AppendEncodedKeyFrom(nil, enc); !bytes.Equal(got, wantKey) {
					t.Errorf("%v: key state %x from the encoding, want %x", vals, got, wantKey)
				}
				// The accumulator of the same rows, kept with and without
				// its group values, encodes to the same bytes.
				lazy, eager := a.NewAccumulator(), a.NewAccumulator()
				e := &contract.Element{Value: r}
				lazy, _ = a.AddInputErr(lazy, e)
				a.ScalarKeys = false
				eager, _ = a.AddInputErr(eager, e)
				a.ScalarKeys = true
				wantState, err := a.EncodeState(contract.AccumulatorCell, eager)
				if err != nil {
					t.Fatal(err)
				}
				if got, _ := a.AppendEncodedStateFor(nil, enc, contract.AccumulatorCell, lazy); !bytes.Equal(got, wantState) {
					t.Errorf("%v: accumulator state %x from the encoding, want %x", vals, got, wantState)
				}
				// Output reads the group values from the key.
				w := window.Window{Start: 0, End: 3600000}
				if got, want := a.Output(key, lazy, w, window.NoFiring), a.Output(a.Key(r), eager, w, window.NoFiring); !reflect.DeepEqual(got, want) {
					t.Errorf("%v: output %v, want %v", vals, got, want)
				}
			}
			// An element that is not a row has the empty encoding, and the
			// nil key, as Key gives it.
			if key, err := a.KeyFromEncoding(""); err != nil || key != nil {
				t.Errorf("key of the empty encoding: %#v, %v; want nil", key, err)
			}
			wantNil, _ := a.EncodeKey(nil)
			if got, _ := a.AppendEncodedKeyFrom(nil, ""); !bytes.Equal(got, wantNil) {
				t.Errorf("state of the empty encoding %x, want %x", got, wantNil)
			}
			if _, err := a.KeyFromEncoding(enc1(a, schema)[:3]); err == nil {
				t.Errorf("a truncated encoding decoded without an error")
			}
		})
	}
}

// enc1 is the encoding of a row with every field set.
func enc1(a *combine.Aggregator, schema *row.Schema) string {
	r := row.New(schema)
	for i, f := range schema.Fields {
		switch f.Type.Kind {
		case row.KindString:
			r.Values[i] = "some-key"
		case row.KindInt:
			r.Values[i] = int64(1)
		case row.KindFloat:
			r.Values[i] = 2.5
		case row.KindBool:
			r.Values[i] = true
		case row.KindTimestamp:
			r.Values[i] = mtime.Time(1)
		}
	}
	return string(a.AppendKey(nil, r))
}

// A group_by field that is not a scalar keeps keys whole.
func TestCombineListKeyKeptWhole(t *testing.T) {
	if combine.ScalarFields([]row.Field{{Name: "s", Type: row.Of(row.KindString)}, {Name: "l", Type: row.Type{Kind: row.KindList}}}) {
		t.Errorf("a list field counted as a scalar")
	}
	if !combine.ScalarFields(nil) {
		t.Errorf("no group_by fields: keys are empty, kept as encodings")
	}
}

// keysStore is an in-memory checkpoint store (runner.StateReader).
type keysStore struct {
	mu        sync.Mutex
	state     map[string]map[uint16]map[string][]byte
	positions map[string][][]byte
	epoch     uint64
}

func (m *keysStore) apply(cp *contract.Checkpoint) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state == nil {
		m.state = map[string]map[uint16]map[string][]byte{}
	}
	for _, e := range cp.State {
		g := m.state[e.Step][e.KeyGroup]
		if g == nil {
			if m.state[e.Step] == nil {
				m.state[e.Step] = map[uint16]map[string][]byte{}
			}
			g = map[string][]byte{}
			m.state[e.Step][e.KeyGroup] = g
		}
		if e.Value == nil {
			delete(g, string(e.Key))
		} else {
			g[string(e.Key)] = e.Value
		}
	}
	m.positions, m.epoch = cp.Positions, cp.Epoch
}

func (m *keysStore) Scan(_ context.Context, step string, kgs []int, fn func(uint16, []byte, []byte) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, kg := range kgs {
		for k, v := range m.state[step][uint16(kg)] {
			if err := fn(uint16(kg), []byte(k), v); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestCombineKeysAcrossHandovers: a streaming Combine grouped by a string,
// an int and a bool takes a checkpoint, then hands its state to a second
// execution, in memory (adoption, as an update or a rescale does) or
// through the store (a restart), with every pairing of keys kept as
// encodings and kept whole; the totals the second execution writes count
// every message once, under the right key.
func TestCombineKeysAcrossHandovers(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after bool // keys kept as encodings
		adopt         bool
		workers       [2]int
	}{
		{"encodings-adopted", true, true, true, [2]int{2, 2}},
		{"encodings-rescaled", true, true, true, [2]int{2, 3}},
		{"encodings-restored", true, true, false, [2]int{2, 1}},
		{"encodings-to-whole-adopted", true, false, true, [2]int{2, 2}},
		{"whole-to-encodings-adopted", false, true, true, [2]int{1, 2}},
		{"encodings-to-whole-restored", true, false, false, [2]int{2, 2}},
		{"whole-to-encodings-restored", false, true, false, [2]int{2, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			b := ordersBroker(t, dir)
			job := &JobEnv{Name: "keys-job", ID: "job-1", Generation: 1, DataDir: dir, Broker: b}
			load := func(lazy bool) *contract.Program {
				t.Helper()
				p, err := Load("p.yaml", []byte(fmt.Sprintf(keysPipeline, "s, i, b")), Options{BaseDir: dir, Job: job})
				if err != nil {
					t.Fatal(err)
				}
				prog := p.Program()
				prog.Code["Sums"].(*combine.Aggregator).ScalarKeys = lazy
				return prog
			}
			x, err := runner.Start(ctx, load(tc.before), runner.Options{NumWorkers: tc.workers[0], Checkpoints: true})
			if err != nil {
				t.Fatal(err)
			}
			sub := pubsub.SubscriptionName(job.Name, "In")
			if !await.Until(30*time.Second, 5*time.Millisecond, func() bool { _, err := b.Subscription(ctx, sub); return err == nil }) {
				t.Fatalf("the split did not create subscription %s", sub)
			}
			base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
			want := map[string][2]int64{}
			sent := 0
			// prefix names the keys of a phase: the second execution's own
			// keys are new, so that the keys it took over get no input
			// after the handover and their panes need the keys handed over.
			publish := func(n int, prefix string) {
				t.Helper()
				for j := 0; j < n; j++ {
					i := sent
					sent++
					s := prefix + []string{"NORTH", "", strings.Repeat("é", 100), "a b"}[i%4]
					k, flag := int64(i%3-1), i%2 == 0
					msg := fmt.Sprintf(`{"s": %q, "i": %d, "b": %t, "amount": %d, "t": %q}`, s, k, flag, i, base.Add(time.Duration(i)*time.Second).Format(time.RFC3339))
					if i%7 == 0 {
						msg = fmt.Sprintf(`{"i": %d, "b": %t, "amount": %d, "t": %q}`, k, flag, i, base.Add(time.Duration(i)*time.Second).Format(time.RFC3339))
						s = "<null>"
					}
					if _, err := b.Publish(ctx, "orders", []byte(msg), nil, ""); err != nil {
						t.Fatal(err)
					}
					key := fmt.Sprintf("%s|%d|%t", s, k, flag)
					w := want[key]
					want[key] = [2]int64{w[0] + int64(i), w[1] + 1}
				}
			}
			read := func(x *runner.Execution, n int) {
				t.Helper()
				if !await.Until(30*time.Second, 5*time.Millisecond, func() bool { return x.Metrics().Step("Sums").ElementsIn >= int64(n) }) {
					t.Fatalf("the job read %d elements, want %d", x.Metrics().Step("Sums").ElementsIn, n)
				}
			}
			store := &keysStore{}
			checkpoint := func(x *runner.Execution) {
				t.Helper()
				cp, err := x.Checkpoint(ctx)
				if err != nil {
					t.Fatal(err)
				}
				store.apply(cp)
				if err := x.Commit(ctx, cp); err != nil {
					t.Fatal(err)
				}
			}
			publish(300, "")
			read(x, 300)
			checkpoint(x)
			publish(100, "")
			read(x, 400)
			var opts runner.Options
			if tc.adopt {
				cp, err := x.Pause(ctx)
				if err != nil {
					t.Fatal(err)
				}
				opts = runner.Options{Restore: &contract.Restore{Epoch: cp.Epoch, Positions: cp.Positions},
					Adopt: &runner.Adoption{From: x, Steps: map[string]string{"Sums": "Sums"}}}
				defer func() {
					// The paused checkpoint is encoded by the adopting execution.
					if err := cp.Complete(ctx); err != nil {
						t.Errorf("completing the handover checkpoint: %v", err)
					}
					x.Cancel()
					x.Wait()
				}()
			} else {
				checkpoint(x)
				x.Cancel()
				x.Wait()
				opts = runner.Options{Restore: &contract.Restore{Epoch: store.epoch, Positions: store.positions, State: store}}
			}
			opts.NumWorkers, opts.Checkpoints = tc.workers[1], true
			x2, err := runner.Start(ctx, load(tc.after), opts)
			if err != nil {
				t.Fatal(err)
			}
			publish(200, "late-")
			read(x2, 200)
			checkpoint(x2)
			x2.Drain()
			if _, err := x2.Wait(); err != nil {
				t.Fatalf("the second execution failed: %v", err)
			}
			checkpoint(x2)
			if err := x2.CloseSinks(ctx); err != nil {
				t.Fatal(err)
			}
			got := map[string][2]int64{}
			for _, line := range readJSONLines(t, filepath.Join(dir, "out.jsonl")) {
				s, ok := line["s"].(string)
				if !ok {
					s = "<null>"
				}
				key := fmt.Sprintf("%s|%v|%v", s, line["i"], line["b"])
				g := got[key]
				// Final panes only: the window fires once at the drain.
				got[key] = [2]int64{g[0] + int64(line["total"].(float64)), g[1] + int64(line["n"].(float64))}
			}
			if !reflect.DeepEqual(got, want) {
				keys := make([]string, 0, len(want))
				for k := range want {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					if got[k] != want[k] {
						t.Errorf("%q: total and count %v, want %v", k, got[k], want[k])
					}
				}
				t.Errorf("got %d keys, want %d", len(got), len(want))
			}
		})
	}
}
