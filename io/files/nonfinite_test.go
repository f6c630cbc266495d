package files

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// TestJSONSinkRejectsNonFinite: a NaN or infinite float, which JSON has
// no number for, is a reject of the sink step (value_out_of_range, naming
// the field) and never written (before, it became null, changing the data
// silently); the other rows are written, each line valid JSON. Without
// rejects (Write), it fails the write naming the field.
func TestJSONSinkRejectsNonFinite(t *testing.T) {
	s := row.MustSchema(row.Field{Name: "k", Type: row.Of(row.KindString)}, row.Field{Name: "x", Type: row.Of(row.KindFloat)})
	r := func(k string, x float64) contract.Element {
		return contract.Element{Value: &row.Row{Schema: s, Values: []any{k, x}}}
	}
	tests := []struct {
		name      string
		elems     []contract.Element
		rejected  []int
		wantLines int
		where     string
	}{
		{name: "finite", elems: []contract.Element{r("a", 1.5), r("b", -2)}, wantLines: 2},
		{name: "NaN", elems: []contract.Element{r("a", 1.5), r("b", math.NaN()), r("c", 3)}, rejected: []int{1}, wantLines: 2, where: "field x is NaN"},
		{name: "+Inf", elems: []contract.Element{r("a", math.Inf(1))}, rejected: []int{0}, wantLines: 0, where: "field x is +Inf"},
		{name: "nested -Inf", elems: []contract.Element{{Value: []any{1.0, math.Inf(-1)}}, r("b", 0)}, rejected: []int{0}, wantLines: 1, where: "field [1] is -Inf"},
		{name: "in a map", elems: []contract.Element{{Value: map[string]any{"m": math.NaN()}}, {Value: map[string]any{"m": 1.0}}}, rejected: []int{0}, wantLines: 1, where: "field m is NaN"},
		{name: "deep", elems: []contract.Element{{Value: map[string]any{"a": []any{1.0, map[string]any{"b": math.NaN()}}}}}, rejected: []int{0}, wantLines: 0, where: "field a[1].b is NaN"},
		{name: "float32", elems: []contract.Element{{Value: float32(math.Inf(1))}, {Value: float32(2)}}, rejected: []int{0}, wantLines: 1, where: "the value is +Inf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.jsonl")
			sink := NewSink(path, JSONLines, s)
			rejects, err := sink.WriteRejecting(context.Background(), 0, tt.elems, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := sink.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(rejects) != len(tt.rejected) {
				t.Fatalf("rejects %+v, want indexes %v", rejects, tt.rejected)
			}
			for i, rj := range rejects {
				if rj.Index != tt.rejected[i] || rj.Err.Reason != ReasonValueOutOfRange || !strings.Contains(rj.Err.Message, tt.where) {
					t.Errorf("reject %+v, want index %d, reason %s, message with %q", rj, tt.rejected[i], ReasonValueOutOfRange, tt.where)
				}
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			if out := strings.TrimSpace(string(b)); out != "" {
				lines = strings.Split(out, "\n")
			}
			if len(lines) != tt.wantLines {
				t.Errorf("%d lines written, want %d:\n%s", len(lines), tt.wantLines, b)
			}
			for _, l := range lines {
				var v any
				if err := json.Unmarshal([]byte(l), &v); err != nil || strings.Contains(l, "null") {
					t.Errorf("line %q: %v (want valid JSON with no value replaced by null)", l, err)
				}
			}
		})
	}
	t.Run("Write without rejects", func(t *testing.T) {
		sink := NewSink(filepath.Join(t.TempDir(), "out.jsonl"), JSONLines, s)
		defer sink.Close(context.Background())
		err := sink.Write(context.Background(), 0, []contract.Element{r("a", math.NaN())})
		if err == nil || !strings.Contains(err.Error(), "field x is NaN") {
			t.Errorf("Write of a NaN: %v, want an error naming the field", err)
		}
	})
}
