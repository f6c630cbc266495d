package diff

import (
	"fmt"
	"sort"
)

// Class is the kind of a difference.
type Class string

// The classes of differences.
const (
	// ValueChanged: the same pane (key, window, index, timing) carries
	// another value, and the window's content differs.
	ValueChanged Class = "value_changed"
	// MissingInNew: a row the old run wrote and the new one did not.
	MissingInNew Class = "missing_in_new"
	// ExtraInNew: a row the new run wrote and the old one did not.
	ExtraInNew Class = "extra_in_new"
	// PaneTimingShifted: the window's content is the same, but a pane of
	// it fired with another timing (EARLY, ON_TIME, LATE) or at another
	// index.
	PaneTimingShifted Class = "pane_timing_shifted"
	// PaneAccumulationChanged: the window's content is the same, but its
	// panes carry it differently (accumulating against discarding), so a
	// pane's value differs without any element having changed.
	PaneAccumulationChanged Class = "pane_accumulation_changed"
	// RejectReasonChanged: the same element is rejected for another reason.
	RejectReasonChanged Class = "reject_reason_changed"
	// LatePathChanged: late data took another path: a LATE pane on one side
	// only, or an element rejected as too late on one side only.
	LatePathChanged Class = "late_path_changed"
	// VisibleChanged: the rows are the same, but what a consumer sees of
	// the key and window differs: the output's mode changed (an upsert
	// sink shows the newest pane, 475; an append sink every pane, 425 and
	// 475, which a reader summing them takes for 900).
	VisibleChanged Class = "visible_changed"
)

// Classes lists every class in report order.
var Classes = []Class{ValueChanged, MissingInNew, ExtraInNew, PaneTimingShifted, PaneAccumulationChanged, RejectReasonChanged, LatePathChanged, VisibleChanged}

// Pane is one side's row in a difference.
type Pane struct {
	Index  int64  `json:"index"`
	Timing string `json:"timing"`
	Value  string `json:"value"`
	Reject string `json:"reject,omitempty"`
}

// Difference is one row that differs between old and new.
type Difference struct {
	Class  Class  `json:"class"`
	Output string `json:"output"`
	Key    string `json:"key"`
	Window string `json:"window"`
	// Old and New are the rows on each side; nil when a side has none.
	Old *Pane `json:"old,omitempty"`
	New *Pane `json:"new,omitempty"`
	// OldVisible and NewVisible are what a consumer of the output sees for
	// the key and window on each side after the run ("" when nothing).
	OldVisible string `json:"old_visible,omitempty"`
	NewVisible string `json:"new_visible,omitempty"`
}

// Side is one run's output rows, sorted in Compare's order, and how each
// output is consumed.
type Side struct {
	Rows    RowReader
	Outputs map[string]OutputInfo
}

// Options configure Run.
type Options struct {
	// MaxDetails caps the differences (and noise differences) the report
	// lists one by one; every difference is counted. Default 1000; < 0
	// lists none.
	MaxDetails int
	// Budget is how many differences (noise excluded) still count as
	// parity. Default 0.
	Budget int64
	// KeyTotals compares per-key totals: per output and key, the sum over
	// every window of each numeric field of the visible rows (Report's
	// KeyTotals).
	KeyTotals bool
}

// OutputReport is the summary of one output.
type OutputReport struct {
	Output string `json:"output"`
	Mode   Mode   `json:"mode"`
	// RowsOld and RowsNew count each side's rows; RowsCompared counts the
	// rows compared (pairs of panes, and rows on one side only).
	RowsOld      int64 `json:"rows_old"`
	RowsNew      int64 `json:"rows_new"`
	RowsCompared int64 `json:"rows_compared"`
	Identical    int64 `json:"identical"`
	// IdenticalPercent is Identical / RowsCompared (100 when nothing was
	// compared).
	IdenticalPercent float64 `json:"identical_percent"`
	// Classes counts the differences by class, noise excluded.
	Classes map[Class]int64 `json:"classes"`
	// Differences is the total of Classes.
	Differences int64 `json:"differences"`
	// Noise counts the rows where the old run disagreed with itself, and
	// NoiseDifferences the old-against-new differences they explain.
	Noise            int64 `json:"noise"`
	NoiseDifferences int64 `json:"noise_differences"`
	// Visible compares what consumers see: per key and window, the newest
	// pane (upsert) or every pane summed (append).
	Visible VisibleReport `json:"visible"`
	// KeyTotals counts the keys whose per-key totals differ (with
	// Options.KeyTotals).
	KeyTotals KeyTotalsReport `json:"key_totals"`
}

// VisibleReport compares consumer-visible rows of an output.
type VisibleReport struct {
	// Keys counts the (key, window) pairs either side shows.
	Keys      int64 `json:"keys"`
	Identical int64 `json:"identical"`
	Differing int64 `json:"differing"`
	// SumsOld and SumsNew add each numeric field over the visible rows.
	SumsOld map[string]float64 `json:"sums_old,omitempty"`
	SumsNew map[string]float64 `json:"sums_new,omitempty"`
}

// Report is the outcome of a comparison.
type Report struct {
	Outputs []*OutputReport `json:"outputs"`
	// Differences lists differences one by one (up to Options.MaxDetails),
	// noise excluded, in row order.
	Differences []Difference `json:"differences"`
	// Noise lists the old run's differences with itself (up to MaxDetails).
	Noise []Difference `json:"noise"`
	// Omitted counts the differences and noise left out of the lists.
	Omitted int64 `json:"omitted"`
	// NoiseChecked says the old run was compared with itself.
	NoiseChecked bool `json:"noise_checked"`
	// Budget is Options.Budget; Total the differences, noise excluded.
	Budget int64 `json:"budget"`
	Total  int64 `json:"total"`
	// TotalNoise counts the noise rows over every output.
	TotalNoise int64 `json:"total_noise"`
	// KeyTotals lists the keys whose per-key totals differ (with
	// Options.KeyTotals, up to MaxDetails); KeyTotalsDiffering counts them
	// all and KeyTotalsOmitted those left out of the list. They are a view
	// of row differences (a key's totals differ only where its rows do), so
	// they do not add to Total.
	KeyTotals          []KeyTotal `json:"key_totals,omitempty"`
	KeyTotalsDiffering int64      `json:"key_totals_differing"`
	KeyTotalsOmitted   int64      `json:"key_totals_omitted,omitempty"`
}

// Identical reports parity: no difference beyond the budget, noise
// excluded.
func (r *Report) Identical() bool { return r.Total <= r.Budget }

// Output returns the summary of the named output, or nil.
func (r *Report) Output(name string) *OutputReport {
	for _, o := range r.Outputs {
		if o.Output == name {
			return o
		}
	}
	return nil
}

// Run compares old with new. old2, when its Rows are not nil, is the old
// pipeline run a second time over the same input: where it disagrees with
// old, the disagreement is noise and old-against-new differences of the
// same key and window are counted as noise, not as differences. Every
// side's rows must be sorted (Compare's order); Run reads them group by
// group (one output, key and window), never holding a whole side.
func Run(old, old2, new Side, opts Options) (*Report, error) {
	if opts.MaxDetails == 0 {
		opts.MaxDetails = 1000
	}
	c := &comparer{opts: opts, outs: map[string]*OutputReport{},
		rep: &Report{Budget: opts.Budget, NoiseChecked: old2.Rows != nil, Differences: []Difference{}, Noise: []Difference{}}}
	if opts.KeyTotals {
		c.kt = &keyTotals{}
	}
	sides := []*groupReader{{name: "old", r: old.Rows}, {name: "new", r: new.Rows}}
	if old2.Rows != nil {
		sides = append(sides, &groupReader{name: "old (second run)", r: old2.Rows})
	}
	for _, s := range sides {
		if err := s.prime(); err != nil {
			return nil, err
		}
	}
	for {
		var min *Row
		for _, s := range sides {
			if s.ok && (min == nil || compareGroup(&s.head, min) < 0) {
				h := s.head
				min = &h
			}
		}
		if min == nil {
			break
		}
		groups := make([][]Row, len(sides))
		for i, s := range sides {
			g, err := s.group(min)
			if err != nil {
				return nil, err
			}
			groups[i] = g
		}
		var g2 []Row
		if len(groups) > 2 {
			g2 = groups[2]
		}
		if err := c.group(min, groups[0], groups[1], g2, old.Outputs[min.Output], new.Outputs[min.Output]); err != nil {
			return nil, err
		}
	}
	if c.kt != nil {
		if err := c.flushKeyTotals(); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(c.outs))
	for n := range c.outs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		o := c.outs[n]
		o.IdenticalPercent = 100
		if o.RowsCompared > 0 {
			o.IdenticalPercent = 100 * float64(o.Identical) / float64(o.RowsCompared)
		}
		c.rep.Outputs = append(c.rep.Outputs, o)
	}
	return c.rep, nil
}

// groupReader reads one side's rows a group at a time.
type groupReader struct {
	name string
	r    RowReader
	head Row
	ok   bool
	prev Row
	seen bool
}

func (g *groupReader) prime() error {
	if g.r == nil {
		return fmt.Errorf("the %s side has no rows reader", g.name)
	}
	return g.advance()
}

func (g *groupReader) advance() error {
	r, ok, err := g.r.Next()
	if err != nil {
		return fmt.Errorf("reading the %s run's rows: %w", g.name, err)
	}
	if ok && g.seen && Compare(&g.prev, &r) > 0 {
		return fmt.Errorf("the %s run's rows are not sorted: %s/%s/%s pane %d comes after %s/%s/%s pane %d",
			g.name, r.Output, r.Key, r.Window, r.PaneIndex, g.prev.Output, g.prev.Key, g.prev.Window, g.prev.PaneIndex)
	}
	g.head, g.ok = r, ok
	if ok {
		g.prev, g.seen = r, true
	}
	return nil
}

// group returns the rows of the group of key (none when the side has
// none) and moves past them.
func (g *groupReader) group(key *Row) ([]Row, error) {
	var out []Row
	for g.ok && g.head.sameGroup(key) {
		out = append(out, g.head)
		if err := g.advance(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

type comparer struct {
	opts Options
	outs map[string]*OutputReport
	rep  *Report
	kt   *keyTotals // nil unless Options.KeyTotals
}

func (c *comparer) output(name string, mode Mode) *OutputReport {
	o := c.outs[name]
	if o == nil {
		if mode == "" {
			mode = ModeAppend
		}
		o = &OutputReport{Output: name, Mode: mode, Classes: map[Class]int64{}}
		for _, cl := range Classes {
			o.Classes[cl] = 0
		}
		c.outs[name] = o
	}
	return o
}

// group compares one output's rows of one key and window.
func (c *comparer) group(key *Row, old, new, old2 []Row, oi, ni OutputInfo) error {
	o := c.output(key.Output, oi.Mode)
	o.RowsOld += int64(len(old))
	o.RowsNew += int64(len(new))
	oldVis, err := visible(old, oi)
	if err != nil {
		return err
	}
	newVis, err := visible(new, ni)
	if err != nil {
		return err
	}
	if err := c.visible(o, oldVis, newVis, old, new); err != nil {
		return err
	}
	if c.kt != nil && !isReject(old) && !isReject(new) {
		if err := c.addKeyTotals(key, oldVis, newVis, len(old) > 0, len(new) > 0); err != nil {
			return err
		}
	}
	diffs, compared, err := compareGroupRows(key, old, new, oi, ni)
	if err != nil {
		return err
	}
	o.RowsCompared += compared
	if len(diffs) == 0 && oldVis != newVis {
		diffs = append(diffs, Difference{Class: VisibleChanged, Output: key.Output, Key: key.Key, Window: key.Window})
	}
	noisy := false
	if c.rep.NoiseChecked {
		noise, _, err := compareGroupRows(key, old, old2, oi, oi)
		if err != nil {
			return err
		}
		if len(noise) > 0 {
			noisy = true
			o.Noise += int64(len(noise))
			c.rep.TotalNoise += int64(len(noise))
			for _, d := range noise {
				c.keep(&c.rep.Noise, d)
			}
		}
	}
	differing := int64(0)
	for _, d := range diffs {
		if d.Class != VisibleChanged {
			differing++
		}
	}
	o.Identical += compared - differing
	for _, d := range diffs {
		if noisy {
			o.NoiseDifferences++
			continue
		}
		d.OldVisible, d.NewVisible = oldVis, newVis
		o.Classes[d.Class]++
		o.Differences++
		c.rep.Total++
		c.keep(&c.rep.Differences, d)
	}
	return nil
}

func (c *comparer) keep(list *[]Difference, d Difference) {
	if c.opts.MaxDetails < 0 || len(*list) >= c.opts.MaxDetails {
		c.rep.Omitted++
		return
	}
	*list = append(*list, d)
}

// visible tallies consumer-visible rows.
func (c *comparer) visible(o *OutputReport, oldVis, newVis string, old, new []Row) error {
	if len(old) == 0 && len(new) == 0 {
		return nil
	}
	o.Visible.Keys++
	if oldVis == newVis && len(old) > 0 && len(new) > 0 {
		o.Visible.Identical++
	} else {
		o.Visible.Differing++
	}
	if len(old) > 0 && old[0].Reject == "" {
		if err := addSums(&o.Visible.SumsOld, oldVis); err != nil {
			return err
		}
	}
	if len(new) > 0 && new[0].Reject == "" {
		if err := addSums(&o.Visible.SumsNew, newVis); err != nil {
			return err
		}
	}
	return nil
}

func addSums(sums *map[string]float64, v string) error {
	m, err := decodeObject(v)
	if err != nil {
		return err
	}
	for k, x := range m {
		if f, ok := number(x); ok {
			if *sums == nil {
				*sums = map[string]float64{}
			}
			(*sums)[k] += f
		}
	}
	return nil
}

// visible returns what a consumer of the output sees of a key and window:
// under upsert the newest pane (highest index); under append the sum of
// every pane (numbers added, other fields the last pane's). Rejects are
// seen one by one: their reason and value.
func visible(rows []Row, info OutputInfo) (string, error) {
	if len(rows) == 0 {
		return "", nil
	}
	if rows[0].Reject != "" || info.Mode == ModeUpsert {
		last := rows[len(rows)-1]
		if last.Reject != "" {
			return last.Reject + " " + last.Value, nil
		}
		return last.Value, nil
	}
	vals := make([]string, len(rows))
	for i, r := range rows {
		vals[i] = r.Value
	}
	return sumValues(vals)
}

// content returns the window's whole content as the panes carry it: the
// newest pane of accumulating panes, the sum of discarding ones.
func content(rows []Row, info OutputInfo) (string, error) {
	if len(rows) == 0 {
		return "", nil
	}
	if info.Accumulating {
		return rows[len(rows)-1].Value, nil
	}
	vals := make([]string, len(rows))
	for i, r := range rows {
		vals[i] = r.Value
	}
	return sumValues(vals)
}

func paneOf(r *Row) *Pane {
	return &Pane{Index: r.PaneIndex, Timing: r.Timing, Value: r.Value, Reject: r.Reject}
}

// compareGroupRows compares the rows of one group. Rows are paired by pane
// index (rejects: in order); it returns the differences and how many rows
// it compared.
func compareGroupRows(key *Row, old, new []Row, oi, ni OutputInfo) ([]Difference, int64, error) {
	if len(old) == len(new) {
		same := true
		for i := range old {
			if Compare(&old[i], &new[i]) != 0 {
				same = false
				break
			}
		}
		if same {
			return nil, int64(len(old)), nil
		}
	}
	sameContent := false
	if len(old) > 0 && len(new) > 0 && old[0].Reject == "" && new[0].Reject == "" && !oi.Records && !ni.Records {
		oc, err := content(old, oi)
		if err != nil {
			return nil, 0, err
		}
		nc, err := content(new, ni)
		if err != nil {
			return nil, 0, err
		}
		sameContent = oc == nc
	}
	var diffs []Difference
	var compared int64
	d := func(cl Class, o, n *Row) {
		df := Difference{Class: cl, Output: key.Output, Key: key.Key, Window: key.Window}
		if o != nil {
			df.Old = paneOf(o)
		}
		if n != nil {
			df.New = paneOf(n)
		}
		diffs = append(diffs, df)
	}
	i, j := 0, 0
	for i < len(old) || j < len(new) {
		compared++
		var o, n *Row
		switch {
		case i < len(old) && j < len(new) && pairKey(&old[i]) == pairKey(&new[j]):
			o, n = &old[i], &new[j]
			i++
			j++
		case j >= len(new) || (i < len(old) && pairKey(&old[i]) < pairKey(&new[j])):
			o = &old[i]
			i++
		default:
			n = &new[j]
			j++
		}
		switch {
		case o != nil && n != nil:
			switch {
			case Compare(o, n) == 0:
				// identical
			case o.Reject != "" || n.Reject != "":
				switch {
				case o.Reject == n.Reject:
					d(ValueChanged, o, n)
				case o.Reject == ReasonTooLate || n.Reject == ReasonTooLate:
					d(LatePathChanged, o, n)
				default:
					d(RejectReasonChanged, o, n)
				}
			case o.Timing != n.Timing:
				if (o.Timing == TimingLate) != (n.Timing == TimingLate) && !sameContent {
					d(LatePathChanged, o, n)
				} else {
					d(PaneTimingShifted, o, n)
				}
			case sameContent:
				d(PaneAccumulationChanged, o, n)
			default:
				d(ValueChanged, o, n)
			}
		case o != nil:
			switch {
			case o.Reject == ReasonTooLate || (o.Timing == TimingLate && !sameContent):
				d(LatePathChanged, o, nil)
			case sameContent:
				d(PaneTimingShifted, o, nil)
			default:
				d(MissingInNew, o, nil)
			}
		default:
			switch {
			case n.Reject == ReasonTooLate || (n.Timing == TimingLate && !sameContent):
				d(LatePathChanged, nil, n)
			case sameContent:
				d(PaneTimingShifted, nil, n)
			default:
				d(ExtraInNew, nil, n)
			}
		}
	}
	return diffs, compared, nil
}

// pairKey is what pairs rows of a group: the pane index (for rejects, the
// index of the reject within its group comes from the pane index the
// capture gives it).
func pairKey(r *Row) int64 { return r.PaneIndex }

// isReject reports whether a group's rows are rejected elements.
func isReject(rows []Row) bool { return len(rows) > 0 && rows[0].Reject != "" }
