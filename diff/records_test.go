package diff

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLayoutRow(t *testing.T) {
	l := Layout{Output: "out", Key: []string{"region"}, Window: []string{"window_start", "window_end"}, Ignore: []string{"pane_index"}}
	tests := []struct {
		name    string
		rec     map[string]any
		want    Row
		wantErr string
	}{
		{
			name: "a JSON line with a window",
			rec:  map[string]any{"region": "NORTH", "total": json.Number("425.0"), "window_start": "2026-03-01T00:00:00Z", "window_end": "2026-03-01T00:05:00Z", "pane_index": json.Number("1")},
			want: Row{Output: "out", Key: `{"region":"NORTH"}`, Window: "2026-03-01T00:00:00.000Z/2026-03-01T00:05:00.000Z", Timing: TimingUnknown, Value: `{"total":425}`},
		},
		{
			name: "a SQL row: integers, times, the global window",
			rec:  map[string]any{"region": "WEST", "total": int64(100), "window_start": nil, "window_end": nil},
			want: Row{Output: "out", Key: `{"region":"WEST"}`, Window: "global", Timing: TimingUnknown, Value: `{"total":100}`},
		},
		{
			name: "a PostgreSQL timestamptz window",
			rec:  map[string]any{"region": "WEST", "total": 100.5, "window_start": time.Date(2026, 3, 1, 1, 0, 0, 0, time.FixedZone("x", 3600)), "window_end": time.Date(2026, 3, 1, 0, 5, 0, 0, time.UTC)},
			want: Row{Output: "out", Key: `{"region":"WEST"}`, Window: "2026-03-01T00:00:00.000Z/2026-03-01T00:05:00.000Z", Timing: TimingUnknown, Value: `{"total":100.5}`},
		},
		{name: "a missing key field", rec: map[string]any{"total": 1}, wantErr: `no key field "region" (fields: total)`},
		{name: "a bad window bound", rec: map[string]any{"region": "N", "window_start": true}, wantErr: `window field "window_start"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := l.Row(tt.rec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestRejectRow(t *testing.T) {
	tests := []struct {
		name       string
		rec        map[string]any
		wantKey    string
		wantReason string
		wantErr    string
	}{
		{name: "weir's error output", rec: map[string]any{"element": map[string]any{"region": "UNKNOWN", "amount": json.Number("50")}, "error": map[string]any{"reason": "unknown_region", "step": "Map"}},
			wantKey: `{"amount":50,"region":"UNKNOWN"}`, wantReason: "unknown_region"},
		{name: "a flat export", rec: map[string]any{"region": "UNKNOWN", "amount": 50.0, "reason": "unknown_region", "message": "no such region"},
			wantKey: `{"amount":50,"region":"UNKNOWN"}`, wantReason: "unknown_region"},
		{name: "no reason", rec: map[string]any{"region": "UNKNOWN"}, wantErr: "carries no reason"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, el, err := RejectRow("rejects", tt.rec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Key != tt.wantKey || r.Reject != tt.wantReason || el["region"] != "UNKNOWN" {
				t.Fatalf("got %+v, element %v", r, el)
			}
		})
	}
}

// TestKeyTotals: a replacement that attributes WEST to NORTH keeps the
// grand total (525) but changes two keys' totals.
func TestKeyTotals(t *testing.T) {
	info := map[string]OutputInfo{"out": {Mode: ModeUpsert}}
	old := []Row{
		pane("out", `{"region":"NORTH"}`, w0, 0, TimingOnTime, `{"total":250}`),
		pane("out", `{"region":"NORTH"}`, w1, 0, TimingOnTime, `{"total":175}`),
		pane("out", `{"region":"WEST"}`, w0, 0, TimingOnTime, `{"total":100}`),
	}
	tests := []struct {
		name string
		new  []Row
		want []KeyTotal
	}{
		{name: "identical", new: old},
		{name: "windows swapped: rows differ, totals do not", new: []Row{
			pane("out", `{"region":"NORTH"}`, w0, 0, TimingOnTime, `{"total":175}`),
			pane("out", `{"region":"NORTH"}`, w1, 0, TimingOnTime, `{"total":250}`),
			pane("out", `{"region":"WEST"}`, w0, 0, TimingOnTime, `{"total":100}`),
		}},
		{name: "WEST attributed to NORTH", new: []Row{
			pane("out", `{"region":"NORTH"}`, w0, 0, TimingOnTime, `{"total":350}`),
			pane("out", `{"region":"NORTH"}`, w1, 0, TimingOnTime, `{"total":175}`),
		}, want: []KeyTotal{
			{Output: "out", Key: `{"region":"NORTH"}`, Old: map[string]float64{"total": 425}, New: map[string]float64{"total": 525}, Fields: []string{"total"}},
			{Output: "out", Key: `{"region":"WEST"}`, Old: map[string]float64{"total": 100}, Fields: []string{"total"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := Run(side(old, info), Side{}, side(tt.new, info), Options{KeyTotals: true})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rep.KeyTotals, tt.want) {
				t.Fatalf("key totals %+v\nwant %+v", rep.KeyTotals, tt.want)
			}
			if rep.KeyTotalsDiffering != int64(len(tt.want)) || rep.Outputs[0].KeyTotals.Keys != 2 {
				t.Fatalf("differing %d, keys %d", rep.KeyTotalsDiffering, rep.Outputs[0].KeyTotals.Keys)
			}
			if o := rep.Outputs[0]; o.Visible.SumsOld["total"] != 525 || o.Visible.SumsNew["total"] != 525 {
				t.Fatalf("grand totals %v, %v, want 525 both", o.Visible.SumsOld, o.Visible.SumsNew)
			}
		})
	}
}

func TestOrdinals(t *testing.T) {
	rows := []Row{
		pane("o", "a", "global", 0, "", "1"), pane("o", "a", "global", 0, "", "2"),
		pane("o", "b", "global", 0, "", "1"),
	}
	r := Ordinals(NewSliceReader(rows))
	var got []int64
	for {
		row, ok, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, row.PaneIndex)
	}
	if !reflect.DeepEqual(got, []int64{0, 1, 0}) {
		t.Fatalf("ordinals %v", got)
	}
}
