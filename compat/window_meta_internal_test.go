package compat

import (
	"strings"
	"testing"

	"github.com/weir-dev/weir/graph"
)

// TestWindowFieldsDropped: which changes of a Join's stored row types are
// the window and pane fields becoming metadata, and which are not.
func TestWindowFieldsDropped(t *testing.T) {
	const pane = "pane:" + paneRowType
	rows := func(types ...string) *graph.Coder {
		c := &graph.Coder{URN: "weir:yaml:join_rows", Version: 1}
		for i, ty := range types {
			c.Fields = append(c.Fields, graph.Field{Name: string(rune('a' + i)), Type: ty})
		}
		return c
	}
	tests := []struct {
		name     string
		old, new *graph.Coder
		want     string // "" when not such a change
	}{
		{"trailing", rows("{u:string,window_start:timestamp,window_end:timestamp," + pane + "}"), rows("{u:string}"), "a: window_start, window_end, pane"},
		{"in the middle", rows("{u:string,window_start:timestamp,window_end:timestamp," + pane + ",big:bool}"), rows("{u:string,big:bool}"), "a: window_start, window_end, pane"},
		{"suffixed", rows("{u:string,"+pane+",pane0:"+paneRowType+"}", "{v:int}"), rows("{u:string}", "{v:int}"), "a: pane, pane0"},
		{"some only", rows("{u:string,window_start:timestamp,window_end:timestamp}"), rows("{u:string,window_start:timestamp}"), "a: window_end"},
		{"nested types kept", rows("{u:row{x:list<int>,y:string},window_end:timestamp}"), rows("{u:row{x:list<int>,y:string}}"), "a: window_end"},
		{"equal", rows("{u:string}"), rows("{u:string}"), ""},
		{"another field dropped", rows("{u:string,v:int,window_end:timestamp}"), rows("{u:string}"), ""},
		{"a type changed too", rows("{u:string,window_end:timestamp}"), rows("{u:int}"), ""},
		{"window field of another type", rows("{u:string,window_start:string}"), rows("{u:string}"), ""},
		{"a field added", rows("{u:string,window_end:timestamp}"), rows("{u:string,w:int}"), ""},
		{"reordered", rows("{u:string,v:int,window_end:timestamp}"), rows("{v:int,u:string}"), ""},
		{"an input added", rows("{u:string,window_end:timestamp}"), rows("{u:string}", "{v:int}"), ""},
		{"another coder", &graph.Coder{URN: "weir:coder:row", Version: 1, Fields: []graph.Field{{Name: "window_end", Type: "timestamp"}}}, &graph.Coder{URN: "weir:coder:row", Version: 1}, ""},
		{"another version", rows("{u:string,window_end:timestamp}"), &graph.Coder{URN: "weir:yaml:join_rows", Version: 2, Fields: []graph.Field{{Name: "a", Type: "{u:string}"}}}, ""},
		{"malformed", rows("{u:string,window_end:timestamp"), rows("{u:string}"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dropped, ok := windowFieldsDropped(tc.old, tc.new)
			got := strings.Join(dropped, "; ")
			if ok != (tc.want != "") || got != tc.want {
				t.Errorf("windowFieldsDropped = %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}

// TestCountsNowElements: a count of a value field that became Beam's count
// of elements, and changes that are not that.
func TestCountsNowElements(t *testing.T) {
	acc := func(fields ...string) *graph.Coder {
		c := &graph.Coder{URN: accumulatorURN, Version: 1}
		for _, f := range fields {
			name, typ, _ := strings.Cut(f, ":")
			c.Fields = append(c.Fields, graph.Field{Name: name, Type: typ})
		}
		return c
	}
	tests := []struct {
		name     string
		old, new *graph.Coder
		want     []int
	}{
		{"count of a field", acc("sum:int", "count:int"), acc("sum:int", "count:none"), []int{2}},
		{"two counts", acc("count:string", "count:int"), acc("count:none", "count:none"), []int{1, 2}},
		{"the other way", acc("count:none"), acc("count:int"), nil},
		{"another fn", acc("count:int"), acc("sum:none"), nil},
		{"a sum changed too", acc("sum:int", "count:int"), acc("sum:float", "count:none"), nil},
		{"equal", acc("count:none"), acc("count:none"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			at, ok := countsNowElements(tc.old, tc.new)
			if ok != (tc.want != nil) || len(at) != len(tc.want) {
				t.Fatalf("countsNowElements = %v, %v; want %v", at, ok, tc.want)
			}
			for i := range at {
				if at[i] != tc.want[i] {
					t.Errorf("countsNowElements = %v, want %v", at, tc.want)
				}
			}
		})
	}
}
