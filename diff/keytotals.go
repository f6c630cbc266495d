package diff

import (
	"math"
	"sort"
)

// KeyTotal is one key of an output whose per-key totals differ: the sum
// over every window of each numeric field of what a consumer sees, on each
// side. Equal grand totals can hide wrong key attribution (a replacement
// that attributes WEST's 100 to NORTH has the same grand total, 525, but
// NORTH 425→525 and WEST 100→missing); the per-key totals show it.
type KeyTotal struct {
	Output string `json:"output"`
	Key    string `json:"key"`
	// Old and New are the totals per numeric field; nil when the side has
	// no row of the key.
	Old map[string]float64 `json:"old"`
	New map[string]float64 `json:"new"`
	// Fields lists the fields whose totals differ (every field of the
	// side that has one when the other has none), sorted.
	Fields []string `json:"fields"`
}

// KeyTotalsReport counts an output's per-key totals.
type KeyTotalsReport struct {
	// Keys counts the keys either side has; Differing those whose totals
	// differ.
	Keys      int64 `json:"keys"`
	Differing int64 `json:"differing"`
}

// keyTotals accumulates the per-key totals of the current key (rows come
// sorted by output, key and window, so a key's windows are consecutive).
type keyTotals struct {
	output, key    string
	active         bool
	old, new       map[string]float64
	hasOld, hasNew bool
}

// add adds one group's visible values (rejects are left out: they are
// no key's total).
func (c *comparer) addKeyTotals(key *Row, oldVis, newVis string, hasOld, hasNew bool) error {
	kt := c.kt
	if kt.active && (kt.output != key.Output || kt.key != key.Key) {
		if err := c.flushKeyTotals(); err != nil {
			return err
		}
	}
	if !kt.active {
		*kt = keyTotals{output: key.Output, key: key.Key, active: true}
	}
	if hasOld {
		kt.hasOld = true
		if err := addSums(&kt.old, oldVis); err != nil {
			return err
		}
	}
	if hasNew {
		kt.hasNew = true
		if err := addSums(&kt.new, newVis); err != nil {
			return err
		}
	}
	return nil
}

// flushKeyTotals compares the current key's totals.
func (c *comparer) flushKeyTotals() error {
	kt := c.kt
	if !kt.active {
		return nil
	}
	kt.active = false
	o := c.outs[kt.output]
	o.KeyTotals.Keys++
	var fields []string
	switch {
	case !kt.hasOld || !kt.hasNew:
		for f := range kt.old {
			fields = append(fields, f)
		}
		for f := range kt.new {
			fields = append(fields, f)
		}
		if len(fields) == 0 {
			fields = []string{""} // a key with no numeric field, on one side only
		}
	default:
		for f, v := range kt.old {
			if w, ok := kt.new[f]; !ok || !sameTotal(v, w) {
				fields = append(fields, f)
			}
		}
		for f := range kt.new {
			if _, ok := kt.old[f]; !ok {
				fields = append(fields, f)
			}
		}
	}
	if len(fields) == 0 {
		return nil
	}
	sort.Strings(fields)
	o.KeyTotals.Differing++
	c.rep.KeyTotalsDiffering++
	t := KeyTotal{Output: kt.output, Key: kt.key, Fields: fields}
	if kt.hasOld {
		t.Old = nonNil(kt.old)
	}
	if kt.hasNew {
		t.New = nonNil(kt.new)
	}
	if c.opts.MaxDetails < 0 || len(c.rep.KeyTotals) >= c.opts.MaxDetails {
		c.rep.KeyTotalsOmitted++
		return nil
	}
	c.rep.KeyTotals = append(c.rep.KeyTotals, t)
	return nil
}

func nonNil(m map[string]float64) map[string]float64 {
	if m == nil {
		return map[string]float64{}
	}
	return m
}

// sameTotal compares two sums of floats, allowing for rounding.
func sameTotal(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}
