package row

import (
	"bytes"
	"encoding/json"
	"github.com/weir-dev/weir/mtime"
	"io"
	"reflect"
	"testing"
)

// slowDecode is the general path DecodeFlatJSON must agree with.
func slowDecode(data []byte, s *Schema) (*Row, bool) {
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	r := New(s)
	for i, f := range s.Fields {
		v, err := FromJSON(obj[f.Name], f.Type)
		if err != nil {
			return nil, false
		}
		r.Values[i] = v
	}
	return r, true
}

var fastSchema = MustSchema(
	Field{Name: "key", Type: Of(KindString)},
	Field{Name: "amount", Type: Of(KindInt)},
	Field{Name: "price", Type: Of(KindFloat)},
	Field{Name: "ok", Type: Of(KindBool)},
	Field{Name: "ts", Type: Of(KindTimestamp)},
)

var fastCases = []string{
	`{"key": "a", "amount": 5, "price": 1.5, "ok": true, "ts": "2026-03-01T00:01:00Z"}`,
	`{"key":"b","amount":-7,"price":2e3,"ok":false,"ts":1767225600000}`,
	`  {"amount": 1, "extra": 9, "key": "x"}  `,
	`{}`,
	`{"key": null, "amount": null}`,
	`{"key": "a", "key": "b"}`,
	`{"key": "é ü"}`,
	`{"ts": "1767225600000"}`,
	// Shapes the fast path leaves to the general one.
	`{"key": "a\"b"}`,
	`{"amount": 5.0}`,
	`{"amount": "5"}`,
	`{"amount": 01}`,
	`{"amount": +1}`,
	`{"price": Infinity}`,
	`{"key": {"nested": 1}}`,
	`{"key": [1]}`,
	`{"key": "a"} trailing`,
	`{"key": "a",}`,
	`[1, 2]`,
	`null`,
	`{"key": "a`,
	"{\"key\": \"tab\there\"}",
	`{"ts": "not a time"}`,
	`{"ok": 1}`,
}

func TestDecodeFlatJSONAgreesWithGeneralPath(t *testing.T) {
	for _, c := range fastCases {
		r := New(fastSchema)
		ok := DecodeFlatJSON([]byte(c), fastSchema, r)
		want, wantOK := slowDecode([]byte(c), fastSchema)
		if ok && (!wantOK || !reflect.DeepEqual(r.Values, want.Values)) {
			t.Errorf("%s: fast %v, general %v (ok %v)", c, r.Values, want, wantOK)
		}
	}
	// The common shapes must take the fast path.
	for _, c := range fastCases[:8] {
		if !DecodeFlatJSON([]byte(c), fastSchema, New(fastSchema)) {
			t.Errorf("%s: not decoded by the fast path", c)
		}
	}
}

func FuzzDecodeFlatJSON(f *testing.F) {
	for _, c := range fastCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := New(fastSchema)
		if !DecodeFlatJSON(data, fastSchema, r) {
			return
		}
		want, ok := slowDecode(data, fastSchema)
		if !ok {
			t.Fatalf("%q: the fast path accepted what encoding/json rejects", data)
		}
		if !reflect.DeepEqual(r.Values, want.Values) {
			t.Fatalf("%q: fast %#v, general %#v", data, r.Values, want.Values)
		}
	})
}

func BenchmarkDecodeJSON(b *testing.B) {
	data := []byte(`{"key": "key-42", "amount": 123, "price": 1.5, "ok": true, "ts": "2026-03-01T00:01:00Z"}`)
	b.Run("flat", func(b *testing.B) {
		r := New(fastSchema)
		for i := 0; i < b.N; i++ {
			DecodeFlatJSON(data, fastSchema, r)
		}
	})
	b.Run("general", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			slowDecode(data, fastSchema)
		}
	})
}

// BenchmarkAppendJSON encodes a row of the usual field kinds, as the JSON
// sinks do for every row they write.
func BenchmarkAppendJSON(b *testing.B) {
	s := MustSchema(Field{Name: "key", Type: Of(KindString)}, Field{Name: "count", Type: Of(KindInt)},
		Field{Name: "mean", Type: Of(KindFloat)}, Field{Name: "window_start", Type: Of(KindTimestamp)}, Field{Name: "final", Type: Of(KindBool)})
	r := New(s)
	r.Values[0], r.Values[1], r.Values[2], r.Values[3], r.Values[4] = "key-12345", int64(42), 3.25, mtime.Time(1772323260000), true
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendJSON(buf[:0], r)
	}
}
