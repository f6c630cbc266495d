package diff

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

const (
	w0 = "2026-03-01T00:00:00Z/2026-03-01T00:05:00Z"
	w1 = "2026-03-01T00:05:00Z/2026-03-01T00:10:00Z"
)

func pane(out, key, win string, idx int64, timing, value string) Row {
	return Row{Output: out, Key: key, Window: win, PaneIndex: idx, Timing: timing, Value: value}
}

func reject(out, key, reason, value string) Row {
	return Row{Output: out, Key: key, Window: "global", Timing: TimingUnknown, Value: value, Reject: reason}
}

func side(rows []Row, outs map[string]OutputInfo) Side {
	rows = append([]Row(nil), rows...)
	SortRows(rows)
	return Side{Rows: NewSliceReader(rows), Outputs: outs}
}

// where names a difference by class, key and window.
func where(d Difference) string {
	return fmt.Sprintf("%s %s %s %s", d.Class, d.Output, d.Key, d.Window)
}

func TestRunClassifies(t *testing.T) {
	acc := map[string]OutputInfo{"Totals": {Mode: ModeUpsert, Accumulating: true}, "Rejects": {}}
	disc := map[string]OutputInfo{"Totals": {Mode: ModeUpsert}, "Rejects": {}}
	// The old run of a filter `amount > 100`: per region and window.
	threshold100 := []Row{
		pane("Totals", `{"region":"EAST"}`, w0, 0, TimingOnTime, `{"total":300}`),
		pane("Totals", `{"region":"NORTH"}`, w0, 0, TimingOnTime, `{"total":425}`),
		pane("Totals", `{"region":"NORTH"}`, w1, 0, TimingOnTime, `{"total":150}`),
		pane("Totals", `{"region":"WEST"}`, w0, 0, TimingOnTime, `{"total":120}`),
	}
	// The same input through `amount > 200`: NORTH's 175 in w0 is gone,
	// NORTH's w1 (150) and WEST (120) no longer pass; EAST (300) is
	// untouched.
	threshold200 := []Row{
		pane("Totals", `{"region":"EAST"}`, w0, 0, TimingOnTime, `{"total":300}`),
		pane("Totals", `{"region":"NORTH"}`, w0, 0, TimingOnTime, `{"total":250}`),
	}
	fixtureAcc := []Row{
		pane("Totals", `{"region":"NORTH"}`, w0, 0, TimingOnTime, `{"total":425}`),
		pane("Totals", `{"region":"NORTH"}`, w0, 1, TimingLate, `{"total":475}`),
		reject("Rejects", `"events:6"`, ReasonTooLate, `{"amount":100}`),
	}
	fixtureDisc := []Row{
		pane("Totals", `{"region":"NORTH"}`, w0, 0, TimingOnTime, `{"total":425}`),
		pane("Totals", `{"region":"NORTH"}`, w0, 1, TimingLate, `{"total":50}`),
		reject("Rejects", `"events:6"`, ReasonTooLate, `{"amount":100}`),
	}
	tests := []struct {
		name          string
		old, new      []Row
		oldOut        map[string]OutputInfo
		newOut        map[string]OutputInfo
		want          []string
		wantIdentical int64
	}{
		{name: "identical", old: fixtureAcc, new: fixtureAcc, oldOut: acc, newOut: acc, wantIdentical: 3},
		{
			name: "filter threshold reports exactly the affected keys and windows",
			old:  threshold100, new: threshold200, oldOut: acc, newOut: acc,
			want: []string{
				`value_changed Totals {"region":"NORTH"} ` + w0,
				`missing_in_new Totals {"region":"NORTH"} ` + w1,
				`missing_in_new Totals {"region":"WEST"} ` + w0,
			},
			wantIdentical: 1,
		},
		{
			name: "accumulating late pane against a discarding one is a pane difference",
			old:  fixtureAcc, new: fixtureDisc, oldOut: acc, newOut: disc,
			want:          []string{`pane_accumulation_changed Totals {"region":"NORTH"} ` + w0},
			wantIdentical: 2,
		},
		{
			name: "a discarding late pane that lost an element is a value difference",
			old:  fixtureAcc,
			new: []Row{
				pane("Totals", `{"region":"NORTH"}`, w0, 0, TimingOnTime, `{"total":425}`),
				pane("Totals", `{"region":"NORTH"}`, w0, 1, TimingLate, `{"total":40}`),
				reject("Rejects", `"events:6"`, ReasonTooLate, `{"amount":100}`),
			},
			oldOut: acc, newOut: disc,
			want:          []string{`value_changed Totals {"region":"NORTH"} ` + w0},
			wantIdentical: 2,
		},
		{
			name: "late element dropped instead of firing a late pane",
			old:  fixtureAcc,
			new: []Row{
				pane("Totals", `{"region":"NORTH"}`, w0, 0, TimingOnTime, `{"total":425}`),
				reject("Rejects", `"events:4"`, ReasonTooLate, `{"amount":50}`),
				reject("Rejects", `"events:6"`, ReasonTooLate, `{"amount":100}`),
			},
			oldOut: acc, newOut: acc,
			want: []string{
				`late_path_changed Rejects "events:4" global`,
				`late_path_changed Totals {"region":"NORTH"} ` + w0,
			},
			wantIdentical: 2,
		},
		{
			name: "an early pane added before the same on-time total",
			old: []Row{
				pane("Totals", `{"region":"NORTH"}`, w0, 0, TimingOnTime, `{"total":425}`),
			},
			new: []Row{
				pane("Totals", `{"region":"NORTH"}`, w0, 0, TimingEarly, `{"total":250}`),
				pane("Totals", `{"region":"NORTH"}`, w0, 1, TimingOnTime, `{"total":425}`),
			},
			oldOut: acc, newOut: acc,
			want: []string{
				`pane_timing_shifted Totals {"region":"NORTH"} ` + w0,
				`pane_timing_shifted Totals {"region":"NORTH"} ` + w0,
			},
		},
		{
			name: "reject reason changed",
			old:  []Row{reject("Rejects", `"events:3"`, "known_region", `{"amount":50}`)},
			new:  []Row{reject("Rejects", `"events:3"`, "positive_amount", `{"amount":50}`)},
			want: []string{`reject_reason_changed Rejects "events:3" global`},
		},
		{
			name: "extra in new",
			old:  nil,
			new:  []Row{pane("Totals", `{"region":"SOUTH"}`, w1, 0, TimingOnTime, `{"total":1}`)},
			want: []string{`extra_in_new Totals {"region":"SOUTH"} ` + w1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := Run(side(tt.old, tt.oldOut), Side{}, side(tt.new, tt.newOut), Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range rep.Differences {
				got = append(got, where(d))
			}
			sort.Strings(got)
			want := append([]string(nil), tt.want...)
			sort.Strings(want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("differences:\n got %q\nwant %q", got, want)
			}
			var identical, total int64
			for _, o := range rep.Outputs {
				identical += o.Identical
				total += o.Differences
			}
			if identical != tt.wantIdentical {
				t.Errorf("identical rows = %d, want %d", identical, tt.wantIdentical)
			}
			if total != int64(len(tt.want)) || rep.Total != total {
				t.Errorf("counted %d differences (report total %d), want %d", total, rep.Total, len(tt.want))
			}
			if rep.Identical() != (len(tt.want) == 0) {
				t.Errorf("Identical() = %v with %d differences", rep.Identical(), len(tt.want))
			}
		})
	}
}

func TestRunVisibleTotals(t *testing.T) {
	rows := []Row{
		pane("Totals", `{"region":"NORTH"}`, w0, 0, TimingOnTime, `{"total":425}`),
		pane("Totals", `{"region":"NORTH"}`, w0, 1, TimingLate, `{"total":475}`),
		pane("Totals", `{"region":"NORTH"}`, w1, 0, TimingOnTime, `{"total":30}`),
	}
	tests := []struct {
		mode Mode
		want float64
	}{
		// An upserting sink shows 475 for the window; an append-only sum of
		// the two panes shows 900.
		{ModeUpsert, 475 + 30},
		{ModeAppend, 900 + 30},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			outs := map[string]OutputInfo{"Totals": {Mode: tt.mode, Accumulating: true}}
			rep, err := Run(side(rows, outs), Side{}, side(rows, outs), Options{})
			if err != nil {
				t.Fatal(err)
			}
			o := rep.Output("Totals")
			if got := o.Visible.SumsOld["total"]; got != tt.want {
				t.Errorf("visible total = %v, want %v", got, tt.want)
			}
			if o.Visible.Keys != 2 || o.Visible.Identical != 2 {
				t.Errorf("visible keys %d identical %d, want 2 and 2", o.Visible.Keys, o.Visible.Identical)
			}
		})
	}
	// Mixed modes: the same panes seen through an upsert sink on the old
	// side and an append sink on the new differ in what consumers see.
	rep, err := Run(side(rows, map[string]OutputInfo{"Totals": {Mode: ModeUpsert, Accumulating: true}}), Side{},
		side(rows, map[string]OutputInfo{"Totals": {Mode: ModeAppend, Accumulating: true}}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := rep.Output("Totals")
	if v := o.Visible; v.Differing != 1 || v.Identical != 1 {
		t.Errorf("visible differing %d identical %d, want 1 and 1 (the two-pane window)", v.Differing, v.Identical)
	}
	if o.Identical != 3 || o.Classes[VisibleChanged] != 1 || rep.Total != 1 || len(rep.Differences) != 1 ||
		rep.Differences[0].OldVisible != `{"total":475}` || rep.Differences[0].NewVisible != `{"total":900}` {
		t.Errorf("identical rows %d, visible_changed %d, total %d, differences %+v; want 3 identical rows and one visible_changed 475 against 900",
			o.Identical, o.Classes[VisibleChanged], rep.Total, rep.Differences)
	}
}

func TestRunSubtractsNoise(t *testing.T) {
	outs := map[string]OutputInfo{"Out": {Mode: ModeUpsert, Accumulating: true}}
	old := []Row{
		pane("Out", `{"k":"a"}`, w0, 0, TimingOnTime, `{"n":1,"at":"12:00:01"}`),
		pane("Out", `{"k":"b"}`, w0, 0, TimingOnTime, `{"n":2}`),
	}
	old2 := []Row{
		pane("Out", `{"k":"a"}`, w0, 0, TimingOnTime, `{"n":1,"at":"12:00:02"}`),
		pane("Out", `{"k":"b"}`, w0, 0, TimingOnTime, `{"n":2}`),
	}
	new := []Row{
		pane("Out", `{"k":"a"}`, w0, 0, TimingOnTime, `{"n":1,"at":"12:00:03"}`),
		pane("Out", `{"k":"b"}`, w0, 0, TimingOnTime, `{"n":3}`),
	}
	rep, err := Run(side(old, outs), side(old2, outs), side(new, outs), Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := rep.Output("Out")
	if o.Noise != 1 || o.NoiseDifferences != 1 || rep.TotalNoise != 1 {
		t.Errorf("noise %d, noise differences %d, total noise %d; want 1, 1, 1", o.Noise, o.NoiseDifferences, rep.TotalNoise)
	}
	if len(rep.Differences) != 1 || rep.Differences[0].Key != `{"k":"b"}` || rep.Differences[0].Class != ValueChanged {
		t.Errorf("differences %+v, want only b's value change", rep.Differences)
	}
	if len(rep.Noise) != 1 || rep.Noise[0].Key != `{"k":"a"}` {
		t.Errorf("noise %+v, want a's", rep.Noise)
	}
	// A deterministic pipeline has zero noise, and the report says it
	// checked.
	rep, err = Run(side(old, outs), side(old, outs), side(old, outs), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.NoiseChecked || rep.TotalNoise != 0 || rep.Total != 0 {
		t.Errorf("deterministic: checked %v noise %d total %d", rep.NoiseChecked, rep.TotalNoise, rep.Total)
	}
}

func TestRunBudgetAndDetails(t *testing.T) {
	outs := map[string]OutputInfo{"Out": {Mode: ModeUpsert, Accumulating: true}}
	var old, new []Row
	for i := range 5 {
		old = append(old, pane("Out", fmt.Sprintf(`{"k":%d}`, i), w0, 0, TimingOnTime, `{"n":1}`))
		new = append(new, pane("Out", fmt.Sprintf(`{"k":%d}`, i), w0, 0, TimingOnTime, `{"n":2}`))
	}
	rep, err := Run(side(old, outs), Side{}, side(new, outs), Options{MaxDetails: 2, Budget: 5})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total != 5 || len(rep.Differences) != 2 || rep.Omitted != 3 || !rep.Identical() {
		t.Errorf("total %d listed %d omitted %d identical %v; want 5, 2, 3, true", rep.Total, len(rep.Differences), rep.Omitted, rep.Identical())
	}
	rep, err = Run(side(old, outs), Side{}, side(new, outs), Options{Budget: 4})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Identical() {
		t.Error("5 differences over a budget of 4 count as parity")
	}
}

func TestRunRefusesUnsortedRows(t *testing.T) {
	rows := []Row{
		pane("Out", `{"k":"b"}`, w0, 0, TimingOnTime, `{}`),
		pane("Out", `{"k":"a"}`, w0, 0, TimingOnTime, `{}`),
	}
	_, err := Run(Side{Rows: NewSliceReader(rows)}, Side{}, Side{Rows: NewSliceReader(nil)}, Options{})
	if err == nil || !strings.Contains(err.Error(), "not sorted") {
		t.Fatalf("err = %v, want a not-sorted error", err)
	}
}

// TestSorterSpills checks that rows beyond the memory limit go through
// sorted runs on disk and come back in order, and that a comparison over
// spilled sides gives the report an in-memory one gives.
func TestSorterSpills(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var rows []Row
	for i := range 1000 {
		rows = append(rows, pane("Out", fmt.Sprintf(`{"k":%d}`, rng.Intn(300)), w0, int64(i%3), TimingOnTime, fmt.Sprintf(`{"n":%d}`, i)))
	}
	dir := t.TempDir()
	s := NewSorter(dir, 64)
	defer s.Close()
	for _, r := range rows {
		if err := s.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	if s.Runs() < 10 {
		t.Fatalf("%d sorted runs for 1000 rows at 64 in memory", s.Runs())
	}
	rd, err := s.Reader()
	if err != nil {
		t.Fatal(err)
	}
	var got []Row
	for {
		r, ok, err := rd.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, r)
	}
	want := append([]Row(nil), rows...)
	SortRows(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sorted runs gave %d rows, not the %d rows sorted", len(got), len(want))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	left, _ := filepathGlob(dir)
	if len(left) != 0 {
		t.Errorf("Close left %v", left)
	}
}

func TestSumValues(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{[]string{`{"total":425}`, `{"total":50}`}, `{"total":475}`},
		{[]string{`{"total":1.5,"region":"N"}`, `{"total":2,"region":"N"}`}, `{"region":"N","total":3.5}`},
		{[]string{`7`, `8`}, `15`},
	}
	for _, tt := range tests {
		got, err := sumValues(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("sumValues(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
	if _, err := sumValues([]string{`{"total":`}); err == nil {
		t.Error("a malformed value summed without an error")
	}
}

func filepathGlob(dir string) ([]string, error) { return filepath.Glob(filepath.Join(dir, "*")) }

// TestConserve checks the runbook's batch fixture: 575 in, totals NORTH
// 425 and WEST 100 visible, UNKNOWN's 50 rejected; and that counting the
// two panes of an appended window (900 for 475) breaks the balance.
func TestConserve(t *testing.T) {
	outs := map[string]OutputInfo{"Totals": {Mode: ModeUpsert, Accumulating: true}}
	rows := []Row{
		pane("Totals", `{"region":"NORTH"}`, "global", 0, TimingOnTime, `{"total":425}`),
		pane("Totals", `{"region":"WEST"}`, "global", 0, TimingOnTime, `{"total":100}`),
	}
	rep, err := Run(side(rows, outs), Side{}, side(rows, outs), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := Conserve(rep, false, "old", "amount", "total", 575, 50)
	if !c.Balanced || c.Accepted != 525 {
		t.Errorf("batch fixture: %+v, want 575 = 525 + 50 balanced", c)
	}
	panes := []Row{
		pane("Totals", `{"region":"NORTH"}`, w0, 0, TimingOnTime, `{"total":425}`),
		pane("Totals", `{"region":"NORTH"}`, w0, 1, TimingLate, `{"total":475}`),
	}
	appendOuts := map[string]OutputInfo{"Totals": {Mode: ModeAppend, Accumulating: true}}
	rep, err = Run(side(panes, outs), Side{}, side(panes, appendOuts), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c := Conserve(rep, false, "old", "amount", "total", 575, 100); !c.Balanced {
		t.Errorf("upsert: %+v, want 575 = 475 + 100", c)
	}
	if c := Conserve(rep, true, "new", "amount", "total", 575, 100); c.Balanced || c.Accepted != 900 {
		t.Errorf("append: %+v, want 900 accepted, not balanced", c)
	}
}
