package replace

// The window ownership of the two jobs of a parallel replacement: which
// job's sinks write (SQL) or publish (Pub/Sub) which windows while both
// run.

import (
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/window"
)

// cutRule is the window ownership of the two jobs of one parallel flow.
type cutRule struct {
	newID, oldID string
	// rewind: the new job re-reads from the rewind point, so every window
	// it emits is complete and it writes all of them to SQL.
	rewind bool
	// cut is T0 in mtime milliseconds; mtime.MinTimestamp while unknown.
	cut atomic.Int64
}

// known reports whether T0 is known.
func (r *cutRule) known() bool { return mtime.Time(r.cut.Load()) != mtime.MinTimestamp }

// owns reports whether job id (one of the flow's) writes window w to a
// sink of kind sink. The new job writes the windows that start after T0.
// The old job publishes (Pub/Sub) those that start at or before it; to
// SQL it writes every window.
func (r *cutRule) owns(id, sink string, w window.Window) bool {
	if w.IsGlobal() {
		return true
	}
	c := mtime.Time(r.cut.Load())
	if id == r.newID {
		return c != mtime.MinTimestamp && (r.rewind && sink == "sql" || w.Start > c)
	}
	return sink == "sql" || c == mtime.MinTimestamp || w.Start <= c
}

// cutRuleOf returns the ownership rule of the flow whose new job is
// newID, registering it for both jobs the first time.
func (s *Replace) cutRuleOf(newID, oldID string, rewind bool, cut *time.Time) *cutRule {
	r := &cutRule{newID: newID, oldID: oldID, rewind: rewind}
	r.cut.Store(int64(mtime.MinTimestamp))
	if cut != nil {
		r.cut.Store(int64(mtime.FromTime(*cut)))
	}
	v, _ := s.cuts.LoadOrStore(newID, r)
	r = v.(*cutRule)
	s.cuts.LoadOrStore(oldID, r)
	if cut != nil && !r.known() {
		r.cut.Store(int64(mtime.FromTime(*cut)))
	}
	return r
}

// owns is every service job's sinks' ownership of windows: all of them,
// except for the jobs of a parallel replacement (cutRule).
func (s *Replace) owns(id, sink string, w window.Window) bool {
	v, ok := s.cuts.Load(id)
	if !ok {
		return true
	}
	return v.(*cutRule).owns(id, sink, w)
}
