package weir

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

type flatAcc struct {
	N     int64
	Total float64
	Name  string `json:"name,omitempty"`
	Ok    bool
	Small int8
	U     uint16
	F32   float32
	skip  int //nolint:unused // unexported: encoding/json ignores it
	Gone  int `json:"-"`
}

type cents int64

func (c *cents) UnmarshalJSON(b []byte) error { *c = 7; return nil }

type inner struct{ X int }

// TestFlatJSONTypes: the types read without encoding/json are the flat
// structs encoding/json reads by field name alone.
func TestFlatJSONTypes(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  *flatJSON
		flat bool
	}{
		{"numbers, strings, bools, tags", newFlatJSON[flatAcc](), true},
		{"count and sum", newFlatJSON[struct{ N, Total int64 }](), true},
		{"not a struct", newFlatJSON[int64](), false},
		{"a field with its own UnmarshalJSON", newFlatJSON[struct{ C cents }](), false},
		{"a nested struct", newFlatJSON[struct{ I inner }](), false},
		{"an embedded struct", newFlatJSON[struct{ inner }](), false},
		{"a slice", newFlatJSON[struct{ S []int }](), false},
		{"a pointer", newFlatJSON[struct{ P *int }](), false},
		{"the string option", newFlatJSON[struct {
			N int `json:",string"`
		}](), false},
		{"two fields of one name", newFlatJSON[struct {
			A int `json:"B"`
			B int
		}](), false},
		{"a name encoding/json may treat differently", newFlatJSON[struct {
			A int `json:"a-b"`
		}](), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if (tc.got != nil) != tc.flat {
				t.Errorf("flat = %v, want %v", tc.got != nil, tc.flat)
			}
		})
	}
}

// TestFlatJSONAgreesWithEncodingJSON: whatever flatJSON reads, it reads as
// json.Unmarshal does; what it declines, json.Unmarshal gets. Random
// values as encoding/json writes them, and hand-written inputs around the
// edges (whitespace, order, escapes, nulls, case, numbers out of range).
func TestFlatJSONAgreesWithEncodingJSON(t *testing.T) {
	f := newFlatJSON[flatAcc]()
	r := rand.New(rand.NewPCG(3, 4))
	var inputs []string
	for range 2000 {
		v := flatAcc{N: r.Int64() - math.MaxInt64/2, Total: r.NormFloat64() * 1e6, Ok: r.IntN(2) == 1,
			Small: int8(r.IntN(256) - 128), U: uint16(r.IntN(65536)), F32: float32(r.NormFloat64())}
		if r.IntN(3) > 0 {
			v.Name = fmt.Sprint("key-", r.IntN(1e6))
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, string(b))
	}
	inputs = append(inputs,
		`{}`, ` { "N" : 1 , "Total":2.5 } `, `{"Total":1e3,"N":-0}`, `{"N":1,"N":2}`,
		`{"N":1.0}`, `{"N":1e2}`, `{"N":9223372036854775808}`, `{"Small":128}`, `{"U":-1}`,
		`{"F32":1e39}`, `{"Total":1e400}`, `{"N":01}`, `{"N":-}`, `{"N":1.}`, `{"Total":.5}`,
		`{"n":1}`, `{"name":"a\"b"}`, `{"name":"\u00e9"}`, `{"name":"caf`+"\xff"+`"}`, `{"N":null}`,
		`{"Ok":true}`, `{"Ok":truex}`, `{"Ok":"true"}`, `{"skip":1}`, `{"Gone":1}`, `{"Unknown":1}`,
		`{"N":1,}`, `{"N":1} x`, `{"N" 1}`, `[1]`, ``, `{"N":1`, `{"name":"tab	in"}`, `{"N":+1}`)
	declined := 0
	for _, in := range inputs {
		var want flatAcc
		wantErr := json.Unmarshal([]byte(in), &want)
		var got flatAcc
		if !f.decode([]byte(in), reflect.ValueOf(&got).Elem()) {
			declined++
			continue
		}
		if wantErr != nil {
			t.Errorf("%q: flatJSON read %+v, encoding/json refuses it: %v", in, got, wantErr)
		} else if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: flatJSON read %+v, encoding/json %+v", in, got, want)
		}
	}
	if declined > 40 {
		t.Errorf("flatJSON declined %d inputs, most of them what encoding/json writes", declined)
	}
}

type marshalsItself struct{ N int }

func (m marshalsItself) MarshalJSON() ([]byte, error) { return []byte(`{"N":0}`), nil }

type evenIsZero int

// IsZero makes every even value zero for omitzero.
func (e evenIsZero) IsZero() bool { return e%2 == 0 }

type omitting struct {
	A int     `json:"a,omitempty"`
	F float64 `json:",omitzero"`
	S string  `json:"s,omitempty"`
	B bool    `json:",omitempty"`
	U uint    `json:"u,omitempty,omitzero"`
}

// TestFlatJSONWritesAsEncodingJSON: what flatJSON writes is byte for byte
// what json.Marshal writes; what it declines (escapes, non-ASCII, a float
// that is not finite, a type that marshals itself) json.Marshal gets.
func TestFlatJSONWritesAsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	floats := []float64{0, math.Copysign(0, -1), 1, -1.5, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 123456789e15, math.MaxFloat64,
		math.SmallestNonzeroFloat64, 1.0 / 3, math.Inf(1), math.NaN()}
	strs := []string{"", "key-1", "a\"b", "<tag>", "a&b", "tab\t", "café", "\u2028", "\xff", "back\\slash"}
	var accs []flatAcc
	var omits []omitting
	for i := range 3000 {
		f := floats[i%len(floats)]
		if i >= len(floats)*4 {
			f = r.NormFloat64() * math.Pow(10, float64(r.IntN(50)-25))
		}
		s := strs[i%len(strs)]
		accs = append(accs, flatAcc{N: r.Int64() - math.MaxInt64/2, Total: f, Name: s, Ok: r.IntN(2) == 1,
			Small: int8(r.IntN(256) - 128), U: uint16(r.IntN(65536)), F32: float32(f)})
		omits = append(omits, omitting{A: r.IntN(2), F: []float64{0, math.Copysign(0, -1), f}[r.IntN(3)], S: strs[r.IntN(2)], B: r.IntN(2) == 1, U: uint(r.IntN(2))})
	}
	check := func(t *testing.T, f *flatJSON, v any) bool {
		t.Helper()
		want, wantErr := json.Marshal(v)
		got, ok := f.append([]byte("prefix"), reflect.ValueOf(v))
		if !ok {
			if string(got) != "prefix" {
				t.Errorf("%+v: declined, but changed dst to %q", v, got)
			}
			return false
		}
		if wantErr != nil {
			t.Errorf("%+v: flatJSON wrote %s, encoding/json refuses it: %v", v, got, wantErr)
		} else if string(got) != "prefix"+string(want) {
			t.Errorf("%+v: flatJSON wrote %s, encoding/json %s", v, got[6:], want)
		}
		return true
	}
	fa, fo := newFlatJSON[flatAcc](), newFlatJSON[omitting]()
	for i, a := range accs {
		plain := (a.Name == "" || a.Name == "key-1") && !math.IsInf(a.Total, 0) && !math.IsNaN(a.Total) && !math.IsInf(float64(a.F32), 0)
		if !check(t, fa, a) && plain {
			t.Errorf("%+v: declined, though its strings are plain and its floats finite", a)
		}
		check(t, fo, omits[i])
	}
	if f := newFlatJSON[marshalsItself](); f == nil || f.writes {
		t.Errorf("a type with MarshalJSON: %+v, want read but not written", f)
	}
	type ownZero struct {
		E evenIsZero `json:",omitzero"`
	}
	if f := newFlatJSON[ownZero](); f == nil || f.writes {
		t.Errorf("omitzero on a type with its own IsZero: %+v, want read but not written", f)
	} else if got, want := mustMarshal(t, ownZero{E: 2}), `{}`; got != want {
		t.Errorf("encoding/json wrote %s, want %s (the type's IsZero)", got, want)
	}
}

// TestCombineDecodeStateFallsBack: an accumulator flatJSON declines is
// still read by encoding/json (here its field in another case).
func TestCombineDecodeStateFallsBack(t *testing.T) {
	agg := &combineAgg[string, int64, struct{ N, Total int64 }, int64]{accJSON: newFlatJSON[struct{ N, Total int64 }]()}
	for in, want := range map[string]struct{ N, Total int64 }{
		`{"N":2,"Total":5}`: {2, 5},
		`{"n":3,"total":6}`: {3, 6},
	} {
		got, err := agg.DecodeState("", []byte(in))
		if err != nil || *got.(*struct{ N, Total int64 }) != want {
			t.Errorf("%s: %v %v, want %v", in, got, err, want)
		}
	}
	if _, err := agg.DecodeState("", []byte(`{"N":"x"}`)); err == nil || !strings.Contains(err.Error(), "cannot unmarshal") {
		t.Errorf("a string for an int: %v, want encoding/json's error", err)
	}
}

func BenchmarkDecodeAccumulator(b *testing.B) {
	type acc struct{ N, Total int64 }
	in := []byte(`{"N":12345,"Total":987654321}`)
	b.Run("encoding/json", func(b *testing.B) {
		for range b.N {
			if _, err := decodeJSON[acc](in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("flatJSON", func(b *testing.B) {
		f := newFlatJSON[acc]()
		for range b.N {
			a := new(acc)
			if !f.decode(in, reflect.ValueOf(a).Elem()) {
				b.Fatal("declined")
			}
		}
	})
}

func BenchmarkEncodeAccumulator(b *testing.B) {
	type acc struct{ N, Total int64 }
	v := &acc{N: 12345, Total: 987654321}
	dst := make([]byte, 0, 64)
	b.Run("encoding/json", func(b *testing.B) {
		for range b.N {
			if _, err := appendJSON(dst[:0], *v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("flatJSON", func(b *testing.B) {
		f := newFlatJSON[acc]()
		for range b.N {
			if _, ok := f.append(dst[:0], reflect.ValueOf(v).Elem()); !ok {
				b.Fatal("declined")
			}
		}
	})
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
