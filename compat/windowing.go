package compat

import (
	"fmt"
	"strings"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/window"
)

// windowDiff is how two windowing strategies differ. The string fields
// describe an incompatible change ("" when there is none); params lists the
// changes of numbers only, which pass with a warning.
type windowDiff struct {
	oldKind      window.Kind
	fnKind       string
	trigger      string
	accumulation string
	params       []string
}

// same reports whether nothing differs at all.
func (d windowDiff) same() bool {
	return d.fnKind == "" && d.trigger == "" && d.accumulation == "" && len(d.params) == 0
}

// diffWindowing compares the strategy of a keyed step's input before (o)
// and after (n) an update.
func diffWindowing(o, n window.Strategy) windowDiff {
	o.EnsureDefaults()
	n.EnsureDefaults()
	d := windowDiff{oldKind: o.Fn.Kind}
	if o.Fn.Kind != n.Fn.Kind {
		d.fnKind = fmt.Sprintf("from %s to %s", describeFn(o.Fn), describeFn(n.Fn))
	} else {
		d.num("window size", o.Fn.Size, n.Fn.Size)
		d.num("window period", o.Fn.Period, n.Fn.Period)
		d.num("session gap", o.Fn.Gap, n.Fn.Gap)
		d.num("window offset", o.Fn.Offset, n.Fn.Offset)
	}
	d.num("allowed lateness", o.AllowedLateness, n.AllowedLateness)
	if !sameTriggerShape(o.Trigger, n.Trigger) {
		d.trigger = fmt.Sprintf("from %s to %s", describeTrigger(o.Trigger), describeTrigger(n.Trigger))
	} else {
		d.triggerParams("trigger", o.Trigger, n.Trigger)
	}
	if o.Accumulation != n.Accumulation {
		d.accumulation = fmt.Sprintf("from %s to %s", o.Accumulation, n.Accumulation)
	}
	if o.TimestampCombiner != n.TimestampCombiner {
		d.params = append(d.params, fmt.Sprintf("timestamp combiner from %s to %s", o.TimestampCombiner, n.TimestampCombiner))
	}
	return d
}

func (d *windowDiff) num(what string, o, n mtime.Duration) {
	if o != n {
		d.params = append(d.params, fmt.Sprintf("%s from %s to %s", what, o, n))
	}
}

// triggerParams records count and delay changes of two triggers of the
// same shape; path names the sub-trigger.
func (d *windowDiff) triggerParams(path string, o, n window.Trigger) {
	if o.Count != n.Count {
		d.params = append(d.params, fmt.Sprintf("%s count from %d to %d", path, o.Count, n.Count))
	}
	d.num(path+" delay", o.Delay, n.Delay)
	if o.Early != nil && n.Early != nil {
		d.triggerParams(path+".early", *o.Early, *n.Early)
	}
	if o.Late != nil && n.Late != nil {
		d.triggerParams(path+".late", *o.Late, *n.Late)
	}
	for i := range o.Triggers {
		if i < len(n.Triggers) {
			d.triggerParams(fmt.Sprintf("%s.%d", path, i), o.Triggers[i], n.Triggers[i])
		}
	}
}

// sameTriggerShape reports whether two triggers have the same tree of
// kinds (counts and delays aside): only then can the trigger state of open
// windows, which mirrors the tree, be carried over.
func sameTriggerShape(o, n window.Trigger) bool {
	if normKind(o.Kind) != normKind(n.Kind) || (o.Early == nil) != (n.Early == nil) || (o.Late == nil) != (n.Late == nil) || len(o.Triggers) != len(n.Triggers) {
		return false
	}
	if o.Early != nil && !sameTriggerShape(*o.Early, *n.Early) {
		return false
	}
	if o.Late != nil && !sameTriggerShape(*o.Late, *n.Late) {
		return false
	}
	for i := range o.Triggers {
		if !sameTriggerShape(o.Triggers[i], n.Triggers[i]) {
			return false
		}
	}
	return true
}

func normKind(k window.TriggerKind) window.TriggerKind {
	if k == "" {
		return window.TriggerDefault
	}
	return k
}

// describeFn renders a window function, e.g. "fixed windows of 5m0s".
func describeFn(f window.Fn) string {
	switch f.Kind {
	case window.KindFixed:
		return fmt.Sprintf("fixed windows of %s", f.Size)
	case window.KindSliding:
		return fmt.Sprintf("sliding windows of %s every %s", f.Size, f.Period)
	case window.KindSessions:
		return fmt.Sprintf("sessions with a gap of %s", f.Gap)
	}
	return "the global window"
}

// describeTrigger renders a trigger tree compactly, e.g.
// after_watermark(late=after_count(1)).
func describeTrigger(t window.Trigger) string {
	var args []string
	switch t.Kind {
	case window.TriggerAfterCount:
		args = append(args, fmt.Sprint(t.Count))
	case window.TriggerAfterProcessingTime:
		args = append(args, t.Delay.String())
	}
	if t.Early != nil {
		args = append(args, "early="+describeTrigger(*t.Early))
	}
	if t.Late != nil {
		args = append(args, "late="+describeTrigger(*t.Late))
	}
	for _, sub := range t.Triggers {
		args = append(args, describeTrigger(sub))
	}
	name := string(normKind(t.Kind))
	if len(args) == 0 {
		return name
	}
	return name + "(" + strings.Join(args, ", ") + ")"
}
