package row

import (
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

func TestAppendJSON(t *testing.T) {
	inner := MustSchema(Field{Name: "x", Type: Of(KindInt)})
	s := MustSchema(
		Field{Name: "s", Type: Of(KindString)},
		Field{Name: "i", Type: Of(KindInt)},
		Field{Name: "f", Type: Of(KindFloat)},
		Field{Name: "b", Type: Of(KindBool)},
		Field{Name: "t", Type: Of(KindTimestamp)},
		Field{Name: "n", Type: Of(KindAny)},
		Field{Name: "r", Type: RowOf(inner)},
		Field{Name: "l", Type: ListOf(Of(KindAny))},
	)
	tests := []struct {
		vals []any
		want string
	}{
		{[]any{"a\"b\\\n\x01é\u2028", int64(-3), 1.5, true, mtime.Time(1772323500000), nil, &Row{Schema: inner, Values: []any{int64(7)}}, []any{int64(1), "x", map[string]any{"b": 1.0, "a": nil}}},
			`{"s":"a\"b\\\n\u0001é\u2028","i":-3,"f":1.5,"b":true,"t":"2026-03-01T00:05:00.000Z","n":null,"r":{"x":7},"l":[1,"x",{"a":null,"b":1}]}`},
		{[]any{"", int64(0), math.Inf(1), false, mtime.MinTimestamp, 1e-7, nil, nil},
			`{"s":"","i":0,"f":null,"b":false,"t":"-inf","n":1e-7,"r":null,"l":null}`},
	}
	for _, tc := range tests {
		got := string(AppendJSON(nil, &Row{Schema: s, Values: tc.vals}))
		if got != tc.want {
			t.Errorf("AppendJSON =\n%s\nwant\n%s", got, tc.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("invalid JSON: %s", got)
		}
	}
}

func TestFromJSON(t *testing.T) {
	tests := []struct {
		in      any
		typ     Type
		want    any
		wantErr bool
	}{
		{json.Number("42"), Of(KindInt), int64(42), false},
		{json.Number("4.0"), Of(KindInt), int64(4), false},
		{json.Number("4.5"), Of(KindInt), nil, true},
		{"42", Of(KindInt), nil, true},
		{json.Number("4.5"), Of(KindFloat), 4.5, false},
		{"2026-03-01T00:05:00Z", Of(KindTimestamp), mtime.Time(1772323500000), false},
		{json.Number("1772323500000"), Of(KindTimestamp), mtime.Time(1772323500000), false},
		{"yesterday", Of(KindTimestamp), nil, true},
		{true, Of(KindString), nil, true},
		{nil, Of(KindInt), nil, false},
	}
	for _, tc := range tests {
		got, err := FromJSON(tc.in, tc.typ)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("FromJSON(%#v, %s) = %#v, %v; want %#v, error %v", tc.in, tc.typ, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseText(t *testing.T) {
	tests := []struct {
		in      string
		typ     Type
		want    any
		wantErr bool
	}{
		{"42", Of(KindInt), int64(42), false},
		{"", Of(KindInt), nil, false},
		{"x", Of(KindInt), nil, true},
		{"true", Of(KindBool), true, false},
		{"2.5", Of(KindFloat), 2.5, false},
		{"", Of(KindString), "", false},
		{"2026-03-01T00:05:00Z", Of(KindTimestamp), mtime.Time(1772323500000), false},
	}
	for _, tc := range tests {
		got, err := ParseText(tc.in, tc.typ)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseText(%q, %s) = %#v, %v; want %#v", tc.in, tc.typ, got, err, tc.want)
		}
	}
}

func TestRejectAndPaneRows(t *testing.T) {
	s := MustSchema(Field{Name: "a", Type: Of(KindInt)})
	rj := contract.Reject{Element: &Row{Schema: s, Values: []any{int64(1)}}, Step: "V", Reason: "r", Message: "m", Source: &contract.SourcePos{Source: "f.jsonl", Offset: 3}}
	r, ok := AsRow(rj)
	if !ok {
		t.Fatal("AsRow(Reject) failed")
	}
	want := `{"element":{"a":1},"error":{"step":"V","reason":"r","message":"m","window":null,"watermark":null},"source":{"source":"f.jsonl","offset":3}}`
	if got := r.String(); got != want {
		t.Errorf("reject row = %s, want %s", got, want)
	}
	// A too_late reject carries its window and the watermark.
	rj.Reason, rj.Late = contract.ReasonTooLate, &contract.Lateness{Window: window.Window{Start: 1772323200000, End: 1772323500000}, Watermark: 1772323560000}
	r, _ = AsRow(rj)
	want = `{"element":{"a":1},"error":{"step":"V","reason":"too_late","message":"m","window":{"start":"2026-03-01T00:00:00.000Z","end":"2026-03-01T00:05:00.000Z"},"watermark":"2026-03-01T00:06:00.000Z"},"source":{"source":"f.jsonl","offset":3}}`
	if got := r.String(); got != want {
		t.Errorf("too_late reject row = %s, want %s", got, want)
	}
	p := PaneRow(window.PaneInfo{Index: 1, Timing: window.Late, IsFirst: false, IsLast: true})
	if got := p.String(); got != `{"index":1,"timing":"LATE","is_first":false,"is_last":true}` {
		t.Errorf("pane row = %s", got)
	}
}

func TestSchema(t *testing.T) {
	if _, err := NewSchema(Field{Name: "a"}, Field{Name: "a"}); err == nil {
		t.Error("duplicate field accepted")
	}
	s := MustSchema(Field{Name: "a", Type: Of(KindInt)}, Field{Name: "b", Type: ListOf(Of(KindString))})
	if s.String() != "{a:int,b:list<string>}" || s.Index("b") != 1 || s.Index("c") != -1 {
		t.Errorf("schema %s", s)
	}
	c := s.Coder()
	if c.URN != CoderURN || len(c.Fields) != 2 || c.Fields[1].Type != "list<string>" {
		t.Errorf("coder %v", c)
	}
}

// TestToTimestampSeconds: a numeric timestamp whose magnitude is below 10^11
// is seconds, refused with ErrTimestampInSeconds; from 10^11 on it is
// milliseconds.
func TestToTimestampSeconds(t *testing.T) {
	for _, v := range []any{int64(1772323200), 1772323200, float64(1772323200), json.Number("1772323200"), "1772323200", int64(0), int64(-5), int64(99_999_999_999)} {
		if _, err := ToTimestamp(v); !errors.Is(err, ErrTimestampInSeconds) {
			t.Errorf("ToTimestamp(%T %v) = %v, want ErrTimestampInSeconds", v, v, err)
		}
	}
	for _, v := range []any{int64(100_000_000_000), int64(1772323200000), json.Number("1772323200000"), "1772323200000", float64(1772323200000), mtime.Time(5)} {
		if _, err := ToTimestamp(v); err != nil {
			t.Errorf("ToTimestamp(%T %v): %v", v, v, err)
		}
	}
}
