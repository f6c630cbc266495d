package runner

import (
	"github.com/weir-dev/weir/mtime"
)

// This file tracks the watermarks a receiver gets from its senders.

// watermark returns the minimum output watermark over workers.
func (c *stepCounters) watermark() mtime.Time {
	if len(c.wms) == 0 {
		return mtime.MinTimestamp
	}
	m := mtime.MaxTimestamp
	for i := range c.wms {
		m = mtime.Min(m, mtime.Time(c.wms[i].Load()))
	}
	return m
}

// inputWatermarks tracks, per port, the watermark of every sender and the minimum.
type inputWatermarks struct {
	ports []map[int]mtime.Time
	mins  []mtime.Time
}

func newInputWatermarks(r *run, sp *stepPlan, worker int, localMain bool) inputWatermarks {
	iw := inputWatermarks{ports: make([]map[int]mtime.Time, len(sp.senders)), mins: make([]mtime.Time, len(sp.senders))}
	for p, roots := range sp.senders {
		iw.ports[p] = map[int]mtime.Time{}
		for _, id := range r.senderIDs(roots, p == 0 && localMain, worker) {
			iw.ports[p][id] = mtime.MinTimestamp
		}
		iw.mins[p] = mtime.MinTimestamp
		if len(iw.ports[p]) == 0 {
			iw.mins[p] = mtime.MaxTimestamp
		}
	}
	return iw
}

// update records a sender's watermark and reports whether the port's minimum moved.
func (iw *inputWatermarks) update(port, sender int, wm mtime.Time) bool {
	m := iw.ports[port]
	if old, ok := m[sender]; !ok || wm <= old {
		return false
	}
	m[sender] = wm
	min := mtime.MaxTimestamp
	for _, v := range m {
		if v < min {
			min = v
		}
	}
	if min > iw.mins[port] {
		iw.mins[port] = min
		return true
	}
	return false
}
