package avrorow

import (
	"encoding/binary"
	"errors"
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

func TestDecodeReadsWhatAWriterWrote(t *testing.T) {
	rs, err := Parse(orderSchema)
	if err != nil {
		t.Fatal(err)
	}
	data, err := avro.Marshal(rs, testOrder())
	if err != nil {
		t.Fatal(err)
	}
	sch, err := RowSchema(rs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"exact", data},
		// Bytes after the value are ignored, as Beam's schemaless reader
		// ignores them.
		{"trailing bytes", append(append([]byte(nil), data...), 0xff, 0x01)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode(rs, tc.data)
			if err != nil {
				t.Fatal(err)
			}
			r := row.New(sch)
			for i, f := range sch.Fields {
				if r.Values[i], err = row.FromJSON(m[f.Name], f.Type); err != nil {
					t.Fatalf("field %s: %v", f.Name, err)
				}
			}
			got := string(row.AppendJSON(nil, r))
			want := `{"region":"NORTH","amount":250,"qty":3,"price":1.5,"ok":true,"ts":"2026-03-01T00:01:00.000Z","note":"gift","tags":["a","b"],"attrs":{"x":1},"kind":"B","blob":"hi","ship":{"city":"Oslo"}}`
			if got != want {
				t.Errorf("row\n got %s\nwant %s", got, want)
			}
		})
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

func TestDecodeRefusesMalformedPayloads(t *testing.T) {
	nulls, err := Parse(`{"type": "record", "name": "R", "fields": [{"name": "n", "type": {"type": "array", "items": "null"}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	maps, err := Parse(`{"type": "record", "name": "M", "fields": [{"name": "m", "type": {"type": "map", "values": "null"}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	union, err := Parse(`{"type": "record", "name": "U", "fields": [{"name": "u", "type": ["null", "long"]}, {"name": "s", "type": "string"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	deep, err := Parse(`{"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}`)
	if err != nil {
		t.Fatal(err)
	}
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
		// Eight bytes asking for 2^40 nulls: refused before a decoder
		// would allocate them.
		{"an array of nulls larger than the bound", nulls, cat(zz(1<<40), zz(0)), "more than 1048576"},
		{"blocks adding up past the bound", nulls, cat(zz(MaxElements), zz(1), zz(0)), "more than 1048576"},
		{"a map larger than the bound", maps, cat(zz(-(1 << 30)), zz(0), zz(0)), "more than 1048576"},
		{"a string longer than the payload", union, cat(zz(0), zz(1000), []byte("abc")), "past the payload's end"},
		{"a union branch that does not exist", union, cat(zz(7)), "no branch 7"},
		{"an empty payload", union, nil, "no valid number"},
		{"a truncated number", union, []byte{0x80}, "no valid number"},
		{"a recursive record nested too deep", deep, tooDeep, "nest deeper"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.rs, tc.data)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	// Within the bound, nulls decode.
	m, err := Decode(nulls, cat(zz(3), zz(0)))
	if err != nil || len(m["n"].([]any)) != 3 {
		t.Fatalf("three nulls: %v %v", m, err)
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
			data, err := Encode(r, rs)
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
	if _, err := Encode(r, rs); err == nil {
		t.Fatal("an int past 32 bits was encoded as an Avro int")
	}
	// A symbol the enum does not have is refused.
	r.Values = []any{int64(1), 1.5, "hi", nil, "C", nil}
	if _, err := Encode(r, rs); err == nil {
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
