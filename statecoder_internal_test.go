package weir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/weir-dev/weir/runner/contract"
)

// coderCase is one aggregation's state coder with a key and an accumulator.
type coderCase struct {
	name string
	sc   contract.StateCoder
	key  any
	acc  any
}

func combineCoder[K comparable, V, A, O any](fn CombineFn[V, A, O]) contract.StateCoder {
	return &combineAgg[K, V, A, O]{fn: fn}
}

// TestStateAppenderAgrees: the append-style encodings that checkpoints use
// are byte for byte the encodings of EncodeKey and EncodeState, for the fast
// types and for the JSON fallback.
func TestStateAppenderAgrees(t *testing.T) {
	type point struct{ X, Y int }
	i, s, f := int64(1234567), "north", 2.5
	mean := MeanAcc{Sum: 10, Count: 4}
	mm := MinMaxAcc[int64]{Value: 7, Set: true}
	cases := []coderCase{
		{"int64 key, int64 sum", combineCoder[int64](Sum[int64]()), int64(-42), &i},
		{"string key, string max", combineCoder[string](Max[string]()), "k-1", &MinMaxAcc[string]{Value: s, Set: true}},
		{"string key, float sum", combineCoder[string](Sum[float64]()), "south", &f},
		{"struct key, mean", combineCoder[point](Mean[int64]()), point{1, 2}, &mean},
		{"int64 key, count", combineCoder[int64](Count[string]()), int64(0), &i},
		{"int64 key, min/max acc", combineCoder[int64](Min[int64]()), int64(1 << 40), &mm},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sa, ok := tc.sc.(contract.StateAppender)
			if !ok {
				t.Fatalf("%T does not append", tc.sc)
			}
			prefix := []byte("prefix")
			want, err := tc.sc.EncodeKey(tc.key)
			if err != nil {
				t.Fatal(err)
			}
			got, err := sa.AppendEncodedKey(bytes.Clone(prefix), tc.key)
			if err != nil || !bytes.Equal(got, append(bytes.Clone(prefix), want...)) {
				t.Errorf("key: appended %q (%v), want %q after the prefix", got, err, want)
			}
			want, err = tc.sc.EncodeState(contract.AccumulatorCell, tc.acc)
			if err != nil {
				t.Fatal(err)
			}
			got, err = sa.AppendEncodedState(bytes.Clone(prefix), contract.AccumulatorCell, tc.acc)
			if err != nil || !bytes.Equal(got, append(bytes.Clone(prefix), want...)) {
				t.Errorf("accumulator: appended %q (%v), want %q after the prefix", got, err, want)
			}
		})
	}
}

// migAcc and migFn are a combine whose accumulator is a struct.
type migAcc struct{ N, Adds int64 }

type migFn struct{}

func (migFn) CreateAccumulator() migAcc            { return migAcc{} }
func (migFn) AddInput(a migAcc, v int64) migAcc    { return migAcc{a.N + v, a.Adds + 1} }
func (migFn) MergeAccumulators(a, b migAcc) migAcc { return migAcc{a.N + b.N, a.Adds + b.Adds} }
func (migFn) ExtractOutput(a migAcc) int64         { return a.N }

// TestAccumulatorMigrationEncoding: a combine that declares a migration
// marks what it stores, reads unmarked accumulators through the
// migration (a refused one starts afresh), and a combine without the
// declaration reads marked ones as its own.
func TestAccumulatorMigrationEncoding(t *testing.T) {
	type agg = combineAgg[string, int64, migAcc, int64]
	build := func(opts ...StepOption) *agg {
		p := NewPipeline()
		in := Create(p.Root(), "In", []KV[string, int64]{{Key: "a", Value: 1}})
		CombinePerKey(p.Root(), "C", in, CombineFn[int64, migAcc, int64](migFn{}), opts...)
		if err := p.Err(); err != nil {
			t.Fatal(err)
		}
		return p.code["C"].(*agg)
	}
	migrating := build(MigrateAccumulator(func(old int64) (migAcc, error) {
		if old < 0 {
			return migAcc{}, fmt.Errorf("a negative count %d", old)
		}
		return migAcc{N: old}, nil
	}))
	plain := build()
	marked := append([]byte{migratedAccumulator}, `{"N":7,"Adds":3}`...)
	for _, tc := range []struct {
		name   string
		agg    *agg
		stored []byte
		want   migAcc
		// refused: the runner is told (a contract.PartialStateError) so
		// that it reports the key and window.
		refused bool
	}{
		{"an old int64 migrates", migrating, []byte("42"), migAcc{N: 42}, false},
		{"a refused one starts afresh", migrating, []byte("-1"), migAcc{}, true},
		{"an undecodable one starts afresh", migrating, []byte(`"x"`), migAcc{}, true},
		{"a marked one is the new type", migrating, marked, migAcc{N: 7, Adds: 3}, false},
		{"a later version reads marked ones", plain, marked, migAcc{N: 7, Adds: 3}, false},
		{"and its own", plain, []byte(`{"N":5,"Adds":1}`), migAcc{N: 5, Adds: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := tc.agg.DecodeState(contract.AccumulatorCell, tc.stored)
			var partial *contract.PartialStateError
			switch {
			case tc.refused && (!errors.As(err, &partial) || partial.Reason != accumulatorMigrationFailed):
				t.Fatalf("a refused accumulator: %v, want a PartialStateError with reason %s", err, accumulatorMigrationFailed)
			case !tc.refused && err != nil:
				t.Fatal(err)
			}
			if a := *v.(*migAcc); a != tc.want {
				t.Errorf("got %+v, want %+v", a, tc.want)
			}
		})
	}
	if got := migrating.StateRejects(); got[accumulatorMigrationFailed] != 2 || len(got) != 1 {
		t.Errorf("the migration's rejects: %v, want the 2 refused", got)
	}
	if got := plain.StateRejects(); got != nil {
		t.Errorf("a combine without a migration rejects %v", got)
	}
	for _, c := range []*agg{migrating, plain} {
		a := migAcc{N: 9, Adds: 2}
		enc, err := c.EncodeState(contract.AccumulatorCell, &a)
		if err != nil {
			t.Fatal(err)
		}
		app, err := c.AppendEncodedState(nil, contract.AccumulatorCell, &a)
		if err != nil {
			t.Fatal(err)
		}
		if isMarked := len(enc) > 0 && enc[0] == migratedAccumulator; isMarked != (c.migrate != nil) || !bytes.Equal(enc, app) {
			t.Errorf("encoded %q and appended %q; marked %t, want %t", enc, app, isMarked, c.migrate != nil)
		}
		if v, err := c.DecodeState(contract.AccumulatorCell, enc); err != nil || *v.(*migAcc) != a {
			t.Errorf("round trip: %+v, %v", v, err)
		}
	}
	// The new type must be the combine's accumulator.
	p := NewPipeline()
	in := Create(p.Root(), "In", []KV[string, int64]{{Key: "a", Value: 1}})
	CombinePerKey(p.Root(), "C", in, Sum[int64](), MigrateAccumulator(func(old string) (migAcc, error) { return migAcc{}, nil }))
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "MigrateAccumulator gives a weir.migAcc") {
		t.Errorf("a migration to another type: %v", err)
	}
}

// TestEncodedKeysAgree: a combine that keeps its keys as their encodings
// (string, int64 and int keys) reads each key back from its AppendKey
// encoding, and stores it, from that encoding alone, as the bytes
// AppendEncodedKey writes for the key itself, with and without a re-key
// mark; keys of other types are kept whole.
func TestEncodedKeysAgree(t *testing.T) {
	type point struct{ X, Y int }
	check := func(t *testing.T, ek contract.EncodedKeyer, sa contract.StateAppender, enc []byte, key any) {
		t.Helper()
		got, err := ek.KeyFromEncoding(string(enc))
		if err != nil || got != key {
			t.Errorf("KeyFromEncoding(%q) = %#v, %v; want %#v", enc, got, err, key)
		}
		want, err := sa.AppendEncodedKey([]byte("p"), key)
		if err != nil {
			t.Fatal(err)
		}
		from, err := ek.AppendEncodedKeyFrom([]byte("p"), string(enc))
		if err != nil || !bytes.Equal(from, want) {
			t.Errorf("AppendEncodedKeyFrom(%q) = %q, %v; want %q", enc, from, err, want)
		}
	}
	for _, mark := range [][]byte{nil, contract.RekeyMark("string")} {
		t.Run(fmt.Sprintf("mark %q", mark), func(t *testing.T) {
			s := &combineAgg[string, int64, int64, int64]{kvKeyer: kvKeyer[string, int64]{mark: mark}, fn: Sum[int64](), readKey: keyReader[string]()}
			for _, k := range []string{"", "k-1", "ünïcode", strings.Repeat("x", 300)} {
				check(t, s, s, []byte(k), k)
			}
			i := &combineAgg[int64, int64, int64, int64]{kvKeyer: kvKeyer[int64, int64]{mark: mark}, fn: Sum[int64](), readKey: keyReader[int64]()}
			app, _ := keyAppender[int64]()
			for _, k := range []int64{0, 1, -1, 1 << 62, -1 << 63} {
				check(t, i, i, app(nil, k), k)
			}
			n := &combineAgg[int, int64, int64, int64]{kvKeyer: kvKeyer[int, int64]{mark: mark}, fn: Sum[int64](), readKey: keyReader[int]()}
			appInt, _ := keyAppender[int]()
			for _, k := range []int{0, 7, -300} {
				check(t, n, n, appInt(nil, k), k)
			}
		})
	}
	if _, err := keyReader[int64]()("short"); err == nil {
		t.Error("an integer key's encoding of 5 bytes read back without an error")
	}
	if keyReader[point]() != nil || keyReader[float64]() != nil {
		t.Error("a struct or float key is kept as its encoding; want it kept whole")
	}
	rekeyed := &combineAgg[string, int64, int64, int64]{fn: Sum[int64](), readKey: keyReader[string](), rekeyer: rekeyer[string]{rekey: &keyMigration{}}}
	if rekeyed.KeysFromEncoding() {
		t.Error("a combine that declares a re-key keeps keys as encodings; want them whole")
	}
}

// TestMigrationOptionsRefusedWhereTheyDoNotApply: a re-key or an
// accumulator migration declared on a step that cannot honour it is an
// error of the pipeline, naming the step and where it applies, not an
// option silently ignored.
func TestMigrationOptionsRefusedWhereTheyDoNotApply(t *testing.T) {
	rekey := RekeyFrom(func(k int64) (string, error) { return fmt.Sprint(k), nil })
	migrate := MigrateAccumulator(func(old int64) ([]int64, error) { return []int64{old}, nil })
	stateful := StatefulFn[string, int64, int64]{Process: func(*StateContext[string, int64], int64) error { return nil }}
	cases := []struct {
		name  string
		build func(p *Pipeline, in PCollection[KV[string, int64]])
		want  string
	}{
		{"rekey on a StatefulParDo", func(p *Pipeline, in PCollection[KV[string, int64]]) {
			StatefulParDo(p.Root(), "S", in, stateful, rekey)
		}, `step "S": RekeyFrom applies to a CombinePerKey or a GroupByKey`},
		{"accumulator migration on a StatefulParDo", func(p *Pipeline, in PCollection[KV[string, int64]]) {
			StatefulParDo(p.Root(), "S", in, stateful, migrate)
		}, `step "S": MigrateAccumulator applies to a CombinePerKey`},
		{"accumulator migration on a GroupByKey", func(p *Pipeline, in PCollection[KV[string, int64]]) {
			GroupByKey(p.Root(), "G", in, migrate)
		}, `step "G": MigrateAccumulator applies to a CombinePerKey`},
		{"rekey to another type than a GroupByKey's key", func(p *Pipeline, in PCollection[KV[string, int64]]) {
			GroupByKey(p.Root(), "G", in, RekeyFrom(func(k string) (int64, error) { return 0, nil }))
		}, `RekeyFrom gives a int64, but the GroupByKey's key is a string`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := NewPipeline()
			c.build(p, Create(p.Root(), "In", []KV[string, int64]{{Key: "a", Value: 1}}))
			if err := p.Err(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// TestCellCodecIsJSON: a state cell's values are stored as the JSON
// encoding/json writes for them, whether the codec writes a flat struct
// itself or hands the value to encoding/json, and read back to what
// json.Unmarshal makes of those bytes — including bytes the fast reader
// refuses (escapes, exponents, fields in another order, unknown fields).
func TestCellCodecIsJSON(t *testing.T) {
	type counts struct {
		N     int64   `json:"n"`
		Total float64 `json:"total,omitempty"`
		Name  string
		On    bool
	}
	type nested struct{ In counts }
	check := func(name string, c cellCodec, v any, stored []string, fresh func() any) {
		t.Helper()
		b, err := c.enc(v)
		if err != nil {
			t.Fatalf("%s: encode: %v", name, err)
		}
		want, _ := json.Marshal(v)
		if !bytes.Equal(b, want) {
			t.Errorf("%s: encoded %s, encoding/json writes %s", name, b, want)
		}
		for _, s := range append([]string{string(b)}, stored...) {
			got, err := c.dec([]byte(s))
			if err != nil {
				t.Errorf("%s: decode %s: %v", name, s, err)
				continue
			}
			w := fresh()
			if err := json.Unmarshal([]byte(s), w); err != nil {
				t.Fatalf("%s: json.Unmarshal %s: %v", name, s, err)
			}
			if wv := reflect.ValueOf(w).Elem().Interface(); !reflect.DeepEqual(got, wv) {
				t.Errorf("%s: decoded %s to %#v, json.Unmarshal to %#v", name, s, got, wv)
			}
		}
	}
	for _, v := range []counts{{}, {N: 3, Total: 2.5, Name: "a\"b", On: true}, {N: -1, Total: 1e21}} {
		check("flat struct", codecOf[counts](), v,
			[]string{`{"Name":"x","n":7}`, `{"n":1,"total":1.5e2,"Name":"\u00e9","On":false}`, `{"n":2,"other":[1,2]}`, ` {"n" : 4} `},
			func() any { return new(counts) })
	}
	check("struct of a struct", codecOf[nested](), nested{In: counts{N: 2}}, []string{`{"In":{"n":5}}`}, func() any { return new(nested) })
	check("int64", codecOf[int64](), int64(42), nil, func() any { return new(int64) })
}
