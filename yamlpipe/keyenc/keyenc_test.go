package keyenc

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/weir-dev/weir/mtime"
)

// TestRoundTrip: every value a key or a slot holds reads back as it was
// written, from bytes and from a string, with the bytes after it intact.
func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		v     any
		state bool
		want  any // what reads back; v when nil
	}{
		{name: "null", v: nil},
		{name: "int", v: int64(-42)},
		{name: "float", v: 3.25},
		{name: "true", v: true},
		{name: "false", v: false},
		{name: "empty string", v: ""},
		{name: "string", v: "bid/κ"},
		{name: "event time", v: mtime.Time(1_700_000_000_000)},
		{name: "map as JSON", v: map[string]any{"a": int64(1)}, want: map[string]any{"a": float64(1)}},
		{name: "list in a key is JSON", v: []any{int64(1), "x"}, want: []any{float64(1), "x"}},
		{name: "list in a slot keeps ints", v: []any{int64(1), "x", []any{int64(2)}}, state: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == nil {
				want = tc.v
			}
			var b []byte
			if tc.state {
				b = AppendState([]byte{}, tc.v)
			} else {
				b = Append([]byte{}, tc.v)
			}
			b = append(b, 0xEE) // what follows the value
			got, rest, err := Read(b)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if !reflect.DeepEqual(got, want) || !bytes.Equal(rest, []byte{0xEE}) {
				t.Fatalf("Read = %#v, rest %x; want %#v, rest ee", got, rest, want)
			}
			gotS, restS, err := ReadString(string(b))
			if err != nil {
				t.Fatalf("ReadString: %v", err)
			}
			if !reflect.DeepEqual(gotS, want) || restS != "\xee" {
				t.Fatalf("ReadString = %#v, rest %q; want %#v", gotS, restS, want)
			}
			skipped, err := Skip(b)
			if err != nil || !bytes.Equal(skipped, []byte{0xEE}) {
				t.Fatalf("Skip = %x, %v; want ee, the bytes after the value", skipped, err)
			}
		})
	}
}

// TestEqualValuesEqualBytes: a key's encoding is its identity, so values
// that differ only in type (1 and 1.0, "1" and 1) must not collide.
func TestEqualValuesEqualBytes(t *testing.T) {
	vals := []any{nil, int64(1), float64(1), "1", true, mtime.Time(1), []any{int64(1)}}
	seen := map[string]any{}
	for _, v := range vals {
		k := string(Append(nil, v))
		if prev, ok := seen[k]; ok {
			t.Fatalf("%#v and %#v encode alike", prev, v)
		}
		seen[k] = v
		if again := string(Append(nil, v)); again != k {
			t.Fatalf("%#v encodes differently twice", v)
		}
	}
}

// TestCorrupt: truncated or unknown encodings are errors, never a panic
// or a value.
func TestCorrupt(t *testing.T) {
	full := Append(nil, "abcdef")
	tests := []struct {
		name string
		b    []byte
	}{
		{name: "empty", b: nil},
		{name: "short int", b: []byte{tagInt, 0, 0}},
		{name: "bool without byte", b: []byte{tagBool}},
		{name: "string shorter than its length", b: full[:len(full)-2]},
		{name: "string without length", b: []byte{tagString}},
		{name: "list longer than its bytes", b: []byte{tagList, 9}},
		{name: "bad JSON", b: []byte{tagOther, 2, '{', '{'}},
		{name: "unknown tag", b: []byte{0x7F}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if v, _, err := Read(tc.b); err == nil {
				t.Fatalf("Read(%x) = %#v, want an error", tc.b, v)
			}
			if v, _, err := ReadString(string(tc.b)); err == nil {
				t.Fatalf("ReadString(%x) = %#v, want an error", tc.b, v)
			}
			// Skip does not parse JSON: bad JSON of the right length skips.
			if rest, err := Skip(tc.b); err == nil && tc.name != "bad JSON" {
				t.Fatalf("Skip(%x) = %x, want an error", tc.b, rest)
			}
		})
	}
	if _, _, err := Read([]byte{tagInt}); !errors.Is(err, ErrCorruptValue) {
		t.Fatalf("Read of a short int: %v, want ErrCorruptValue", err)
	}
}
