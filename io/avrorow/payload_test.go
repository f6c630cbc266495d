package avrorow

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
)

const orderSchema = `{"type": "record", "name": "Order", "namespace": "shop", "fields": [
	{"name": "region", "type": "string"},
	{"name": "amount", "type": "long"},
	{"name": "qty", "type": "int"},
	{"name": "price", "type": "float"},
	{"name": "ok", "type": "boolean"},
	{"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
	{"name": "note", "type": ["null", "string"], "default": null},
	{"name": "tags", "type": {"type": "array", "items": "string"}},
	{"name": "attrs", "type": {"type": "map", "values": "long"}},
	{"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
	{"name": "blob", "type": "bytes"},
	{"name": "ship", "type": {"type": "record", "name": "Ship", "fields": [{"name": "city", "type": "string"}]}}
]}`

// order is the Go form hamba/avro encodes the test's payloads from, so
// that the payloads do not come from the code under test.
type order struct {
	Region string           `avro:"region"`
	Amount int64            `avro:"amount"`
	Qty    int32            `avro:"qty"`
	Price  float32          `avro:"price"`
	OK     bool             `avro:"ok"`
	TS     time.Time        `avro:"ts"`
	Note   *string          `avro:"note"`
	Tags   []string         `avro:"tags"`
	Attrs  map[string]int64 `avro:"attrs"`
	Kind   string           `avro:"kind"`
	Blob   []byte           `avro:"blob"`
	Ship   struct {
		City string `avro:"city"`
	} `avro:"ship"`
}

func testOrder() order {
	note := "gift"
	o := order{Region: "NORTH", Amount: 250, Qty: 3, Price: 1.5, OK: true, TS: time.Date(2026, 3, 1, 0, 1, 0, 0, time.UTC),
		Note: &note, Tags: []string{"a", "b"}, Attrs: map[string]int64{"x": 1}, Kind: "B", Blob: []byte("hi")}
	o.Ship.City = "Oslo"
	return o
}

// hambaRow is the oracle: the payload decoded by hamba/avro's generic
// decoder, turned into row values as the file source turns its records.
func hambaRow(t *testing.T, rs *avro.RecordSchema, sch *row.Schema, data []byte) string {
	t.Helper()
	var m map[string]any
	if err := avro.Unmarshal(rs, data, &m); err != nil {
		t.Fatal(err)
	}
	r := row.New(sch)
	for i, f := range sch.Fields {
		v, err := row.FromJSON(Plain(m[f.Name]), f.Type)
		if err != nil {
			t.Fatalf("oracle, field %s: %v", f.Name, err)
		}
		r.Values[i] = v
	}
	return string(row.AppendJSON(nil, r))
}

func decodeRow(t *testing.T, rs *avro.RecordSchema, sch *row.Schema, data []byte) (string, error) {
	t.Helper()
	d, err := NewDecoder(rs, sch)
	if err != nil {
		t.Fatal(err)
	}
	r := row.New(sch)
	if err := d.Decode(data, r.Values); err != nil {
		return "", err
	}
	return string(row.AppendJSON(nil, r)), nil
}

// TestDecoderReadsWhatAWriterWrote: the Decoder reads a record written by
// hamba/avro into the row hamba's own generic decoder gives, for every
// type a row takes.
func TestDecoderReadsWhatAWriterWrote(t *testing.T) {
	rs, err := Parse(orderSchema)
	if err != nil {
		t.Fatal(err)
	}
	sch, err := RowSchema(rs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		order func(o *order)
	}{
		{"every field set", func(*order) {}},
		{"a null, empty lists and maps", func(o *order) { o.Note, o.Tags, o.Attrs = nil, nil, map[string]int64{} }},
		{"before the epoch, extremes", func(o *order) {
			o.TS = time.Date(1969, 12, 31, 23, 59, 59, 999e6, time.UTC)
			o.Amount, o.Qty, o.Price = -1<<63, -1<<31, -3.25
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOrder()
			tc.order(&o)
			data, err := avro.Marshal(rs, o)
			if err != nil {
				t.Fatal(err)
			}
			want := hambaRow(t, rs, sch, data)
			got, err := decodeRow(t, rs, sch, data)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("row\n got %s\nwant %s", got, want)
			}
			// Bytes after the value are ignored, as Beam's schemaless
			// reader ignores them.
			if got2, err := decodeRow(t, rs, sch, append(data, 0xff, 0x01)); err != nil || got2 != want {
				t.Errorf("with trailing bytes: %s, %v", got2, err)
			}
		})
	}
	want := `{"region":"NORTH","amount":250,"qty":3,"price":1.5,"ok":true,"ts":"2026-03-01T00:01:00.000Z","note":"gift","tags":["a","b"],"attrs":{"x":1},"kind":"B","blob":"hi","ship":{"city":"Oslo"}}`
	data, _ := avro.Marshal(rs, testOrder())
	if got, _ := decodeRow(t, rs, sch, data); got != want {
		t.Errorf("row\n got %s\nwant %s", got, want)
	}
}

// zz is n as Avro's zig-zag varint.
func zz(n int64) []byte { return binary.AppendVarint(nil, n) }

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func TestDecoderRefusesMalformedPayloads(t *testing.T) {
	parse := func(text string) *avro.RecordSchema {
		t.Helper()
		rs, err := Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	nulls := parse(`{"type": "record", "name": "R", "fields": [{"name": "n", "type": {"type": "array", "items": "null"}}]}`)
	longs := parse(`{"type": "record", "name": "L", "fields": [{"name": "l", "type": {"type": "array", "items": "long"}}]}`)
	maps := parse(`{"type": "record", "name": "M", "fields": [{"name": "m", "type": {"type": "map", "values": "null"}}]}`)
	union := parse(`{"type": "record", "name": "U", "fields": [{"name": "u", "type": ["null", "long"]}, {"name": "s", "type": "string"}]}`)
	deep := parse(`{"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}`)
	tooDeep := make([]byte, 0, 200)
	for range 100 {
		tooDeep = append(tooDeep, zz(1)...) // branch Node, again and again
	}
	tooDeep = append(tooDeep, zz(0)...)
	for _, tc := range []struct {
		name string
		rs   *avro.RecordSchema
		data []byte
		want string
	}{
		// Eight bytes asking for 2^40 nulls: refused before anything is
		// allocated for them.
		{"an array of nulls larger than the bound", nulls, cat(zz(1<<40), zz(0)), "more than 1048576"},
		{"nulls past the bound on empty items", nulls, cat(zz(MaxEmptyItems), zz(1), zz(0)), "more than 4096 items that take no bytes"},
		{"more longs than the payload holds", longs, cat(zz(1000), zz(1), zz(2)), "more than the payload's 2 bytes left can hold"},
		{"a map larger than the bound", maps, cat(zz(-(1 << 30)), zz(0), zz(0)), "more than 1048576"},
		{"a string longer than the payload", union, cat(zz(0), zz(1000), []byte("abc")), "past the payload's end"},
		{"a union branch that does not exist", union, cat(zz(7)), "no branch 7"},
		{"an empty payload", union, nil, "no valid number"},
		{"a truncated number", union, []byte{0x80}, "no valid number"},
		{"a recursive record nested too deep", deep, tooDeep, "nest deeper"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sch, err := RowSchema(tc.rs)
			if err != nil {
				t.Fatal(err)
			}
			_, err = decodeRow(t, tc.rs, sch, tc.data)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	// Within the bounds, they decode; a recursive record recurs as a map.
	sch, _ := RowSchema(nulls)
	if got, err := decodeRow(t, nulls, sch, cat(zz(3), zz(0))); err != nil || got != `{"n":[null,null,null]}` {
		t.Fatalf("three nulls: %s %v", got, err)
	}
	sch, _ = RowSchema(deep)
	if got, err := decodeRow(t, deep, sch, cat(zz(1), zz(1), zz(0))); err != nil || got != `{"next":{"next":{"next":null}}}` || sch.String() != "{next:any}" {
		t.Fatalf("a list of two: %s %v (rows %s)", got, err, sch)
	}
}

// encode writes r as a record of rs with an Encoder.
func encode(r *row.Row, rs *avro.RecordSchema) ([]byte, error) {
	e, err := NewEncoder(rs)
	if err != nil {
		return nil, err
	}
	return e.Append(nil, r)
}

// TestEncoderWritesWhatHambaReads: every type a row takes, written by the
// Encoder from the rows the Decoder read from hamba's records, reads back
// through hamba/avro's own decoder to the same row.
func TestEncoderWritesWhatHambaReads(t *testing.T) {
	rs, err := Parse(orderSchema)
	if err != nil {
		t.Fatal(err)
	}
	sch, _ := RowSchema(rs)
	d, _ := NewDecoder(rs, sch)
	for _, o := range []order{testOrder(), func() order { o := testOrder(); o.Note, o.Tags = nil, nil; return o }()} {
		want, err := avro.Marshal(rs, o)
		if err != nil {
			t.Fatal(err)
		}
		r := row.New(sch)
		if err := d.Decode(want, r.Values); err != nil {
			t.Fatal(err)
		}
		got, err := encode(r, rs)
		if err != nil {
			t.Fatal(err)
		}
		// hamba writes blocks with their byte sizes, as Avro allows;
		// fastavro (Beam's) and the Encoder without: compare what reads.
		if back := hambaRow(t, rs, sch, got); back != string(row.AppendJSON(nil, r)) {
			t.Errorf("hamba reads the Encoder's record as\n%s\nwant\n%s", back, row.AppendJSON(nil, r))
		}
	}
	// A map is written in key order: one row, one payload.
	ms, _ := Parse(`{"type": "record", "name": "M", "fields": [{"name": "m", "type": {"type": "map", "values": "long"}}]}`)
	msch, _ := RowSchema(ms)
	r := row.New(msch)
	r.Values[0] = map[string]any{"b": int64(2), "a": int64(1), "c": int64(3)}
	first, err := encode(r, ms)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if again, _ := encode(r, ms); !bytes.Equal(again, first) {
			t.Fatalf("a map's bytes changed: %x then %x", first, again)
		}
	}
	if want := cat(zz(3), zz(1), []byte("a"), zz(1), zz(1), []byte("b"), zz(2), zz(1), []byte("c"), zz(3), zz(0)); !bytes.Equal(first, want) {
		t.Errorf("map %x, want %x", first, want)
	}
}

func TestEncodeFitsRowsToAGivenSchema(t *testing.T) {
	rs, err := Parse(`{"type": "record", "name": "Out", "fields": [
		{"name": "qty", "type": "int"},
		{"name": "price", "type": "float"},
		{"name": "blob", "type": "bytes"},
		{"name": "either", "type": ["null", "long", "string"]},
		{"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}},
		{"name": "when", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]}
	]}`)
	if err != nil {
		t.Fatal(err)
	}
	sch := row.MustSchema(
		row.Field{Name: "qty", Type: row.Of(row.KindInt)},
		row.Field{Name: "price", Type: row.Of(row.KindFloat)},
		row.Field{Name: "blob", Type: row.Of(row.KindString)},
		row.Field{Name: "either", Type: row.Of(row.KindAny)},
		row.Field{Name: "kind", Type: row.Of(row.KindString)},
		row.Field{Name: "when", Type: row.Of(row.KindTimestamp)},
	)
	type out struct {
		Qty    int32      `avro:"qty"`
		Price  float32    `avro:"price"`
		Blob   []byte     `avro:"blob"`
		Either any        `avro:"either"`
		Kind   string     `avro:"kind"`
		When   *time.Time `avro:"when"`
	}
	when := mtime.FromTime(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name   string
		either any
		want   any
	}{
		{"a union's long branch", int64(7), int64(7)},
		{"a union's string branch", "seven", "seven"},
		{"a union's null", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := row.New(sch)
			r.Values = []any{int64(3), 1.5, "hi", tc.either, "B", when}
			data, err := encode(r, rs)
			if err != nil {
				t.Fatal(err)
			}
			var got out
			if err := avro.Unmarshal(rs, data, &got); err != nil {
				t.Fatal(err)
			}
			if got.Qty != 3 || got.Price != 1.5 || string(got.Blob) != "hi" || got.Kind != "B" || got.When == nil || !got.When.Equal(when.ToTime()) {
				t.Errorf("decoded %+v", got)
			}
			if got.Either != tc.want {
				t.Errorf("either = %#v, want %#v", got.Either, tc.want)
			}
		})
	}
	// An int that does not fit the schema's int is refused, not wrapped.
	r := row.New(sch)
	r.Values = []any{int64(1) << 40, 1.5, "hi", nil, "A", nil}
	if _, err := encode(r, rs); err == nil {
		t.Fatal("an int past 32 bits was encoded as an Avro int")
	}
	// A symbol the enum does not have is refused.
	r.Values = []any{int64(1), 1.5, "hi", nil, "C", nil}
	if _, err := encode(r, rs); err == nil {
		t.Fatal("an enum symbol not in the schema was encoded")
	}
}

func TestParseRefusesWhatIsNotARecordSchema(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{`"string"`, "not a record"},
		{`{"type": "record"}`, "not an Avro schema"},
		{`not json`, "not an Avro schema"},
	} {
		if _, err := Parse(tc.text); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s) = %v, want %q", tc.text, err, tc.want)
		}
	}
	// Two schemas naming different records alike do not meet.
	a, err := Parse(`{"type": "record", "name": "Same", "fields": [{"name": "a", "type": "long"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse(`{"type": "record", "name": "Same", "fields": [{"name": "b", "type": "string"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if a.Fields()[0].Name() != "a" || b.Fields()[0].Name() != "b" {
		t.Fatalf("fields %s and %s", a.Fields()[0].Name(), b.Fields()[0].Name())
	}
}

// TestDecoderReadsDecimalsExactly: Avro decimals, as bytes and as fixed,
// read as their exact digits (rows have no decimal type; a float would
// round them).
func TestDecoderReadsDecimalsExactly(t *testing.T) {
	rs, err := Parse(`{"type": "record", "name": "D", "fields": [
		{"name": "b", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 2}},
		{"name": "f", "type": {"type": "fixed", "name": "F", "size": 8, "logicalType": "decimal", "precision": 18, "scale": 3}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	sch, err := RowSchema(rs)
	if err != nil {
		t.Fatal(err)
	}
	type dec struct {
		B *big.Rat `avro:"b"`
		F *big.Rat `avro:"f"`
	}
	for _, tc := range []struct{ b, f, want string }{
		{"123.45", "-12.345", `{"b":"123.45","f":"-12.345"}`},
		{"-0.05", "0", `{"b":"-0.05","f":"0.000"}`},
		{"92233720368547758.07", "0.001", `{"b":"92233720368547758.07","f":"0.001"}`},
	} {
		b, _ := new(big.Rat).SetString(tc.b)
		f, _ := new(big.Rat).SetString(tc.f)
		data, err := avro.Marshal(rs, dec{B: b, F: f})
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeRow(t, rs, sch, data)
		if err != nil || got != tc.want {
			t.Errorf("%s, %s: %s, %v; want %s", tc.b, tc.f, got, err, tc.want)
		}
	}
	if _, err := decodeRow(t, rs, sch, cat(zz(2000), make([]byte, 2000))); err == nil || !strings.Contains(err.Error(), "a decimal of 2000 bytes") {
		t.Errorf("a 2,000-byte decimal: %v", err)
	}
}

// TestEncoderWritesDecimals: a decimal field (bytes or fixed) is written
// from the exact digits a decoder reads (so a record read and written
// again keeps its decimals), from an int or from a float, as the two's
// complement hamba reads back; a value with more places than the scale
// or more digits than the precision is an error, not a rounding.
func TestEncoderWritesDecimals(t *testing.T) {
	rs, err := Parse(`{"type": "record", "name": "D", "fields": [
		{"name": "b", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 2}},
		{"name": "f", "type": {"type": "fixed", "name": "F", "size": 2, "logicalType": "decimal", "precision": 4, "scale": 1}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	sch, err := RowSchema(rs)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := NewDecoder(rs, sch)
	type dec struct {
		B *big.Rat `avro:"b"`
		F *big.Rat `avro:"f"`
	}
	third := 1.0
	third /= 3
	for _, tc := range []struct {
		b, f      any
		wantB     string // as hamba reads it
		wantF     string
		wantError string
	}{
		{b: "123.45", f: "-12.3", wantB: "123.45", wantF: "-12.3"},
		{b: "-1.28", f: "-0.1", wantB: "-1.28", wantF: "-0.1"}, // unscaled −128: one byte 0x80
		{b: "1.28", f: "0", wantB: "1.28", wantF: "0"},         // unscaled 128: 0x00 0x80
		{b: "92233720368547758.07", f: "999.9", wantB: "92233720368547758.07", wantF: "999.9"},
		{b: int64(-7), f: 2.5, wantB: "-7", wantF: "2.5"},
		{b: "0.50", f: "1.10", wantB: "0.5", wantF: "1.1"}, // trailing zeros beyond the scale are no rounding
		{b: "1.005", f: "0", wantError: "3 decimal places"},
		{b: "0", f: "1000.0", wantError: "precision 4"},
		{b: "1e5", f: "0", wantError: "not a decimal number"},
		{b: third, f: "0", wantError: "decimal places"},
	} {
		r := row.New(sch)
		r.Values[0], r.Values[1] = tc.b, tc.f
		got, err := encode(r, rs)
		if tc.wantError != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantError) {
				t.Errorf("%v, %v: %v, want an error saying %q", tc.b, tc.f, err, tc.wantError)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v, %v: %v", tc.b, tc.f, err)
		}
		var back dec
		if err := avro.Unmarshal(rs, got, &back); err != nil {
			t.Fatalf("%v, %v: hamba cannot read %x: %v", tc.b, tc.f, got, err)
		}
		wantB, _ := new(big.Rat).SetString(tc.wantB)
		wantF, _ := new(big.Rat).SetString(tc.wantF)
		if back.B.Cmp(wantB) != 0 || back.F.Cmp(wantF) != 0 {
			t.Errorf("%v, %v: hamba reads %s and %s, want %s and %s", tc.b, tc.f, back.B, back.F, tc.wantB, tc.wantF)
		}
		// Read and written again: the same bytes.
		again := row.New(sch)
		if err := d.Decode(got, again.Values); err != nil {
			t.Fatal(err)
		}
		if twice, err := encode(again, rs); err != nil || !bytes.Equal(twice, got) {
			t.Errorf("%v, %v: read as %v and written again as %x, %v; want %x", tc.b, tc.f, again.Values, twice, err, got)
		}
	}
}
