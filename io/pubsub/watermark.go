package pubsub

import (
	"time"

	"github.com/weir-dev/weir/mtime"
)

// Watermark defaults.
const (
	// DefaultMaxOutOfOrderness is how far behind the newest event time seen
	// the source's watermark stays by default.
	DefaultMaxOutOfOrderness = 10 * time.Second
	// DefaultIdleTimeout is how long a caught-up subscription must stay
	// without new messages before its watermark follows processing time.
	DefaultIdleTimeout = 5 * time.Second
)

// WatermarkPolicy is how a Pub/Sub source computes its watermark. A topic
// gives no ordering guarantee on event time, so the source estimates it:
//
//   - With data: watermark = (max event time seen) − MaxOutOfOrderness.
//     Elements up to MaxOutOfOrderness behind the newest one are on time;
//     older ones are late data (the windowing's allowed lateness decides).
//   - Idle: when the subscription has had nothing to deliver for
//     IdleTimeout (it is caught up and no message arrived), watermark =
//     (processing time − MaxOutOfOrderness), so windows fire while the job
//     runs even when publishers fall silent. This assumes event time tracks
//     processing time; set IdleTimeout negative to disable it when a topic
//     carries old event times (a backfill).
//
// The watermark never moves backwards, and without data and before the idle
// timeout it stays at −∞. This is one split's estimate only: the runner
// combines the splits' watermarks (the minimum across splits, then across
// a step's inputs) by the rule written in runner/watermark.go.
type WatermarkPolicy struct {
	// MaxOutOfOrderness is the bound on lateness. Default
	// DefaultMaxOutOfOrderness (10s); negative means 0.
	MaxOutOfOrderness time.Duration
	// IdleTimeout is how long without messages makes the subscription idle.
	// Default DefaultIdleTimeout (5s); negative disables idle advancement.
	IdleTimeout time.Duration
}

// EnsureDefaults fills unset fields with their defaults.
func (p *WatermarkPolicy) EnsureDefaults() {
	if p.MaxOutOfOrderness == 0 {
		p.MaxOutOfOrderness = DefaultMaxOutOfOrderness
	}
	if p.MaxOutOfOrderness < 0 {
		p.MaxOutOfOrderness = 0
	}
	if p.IdleTimeout == 0 {
		p.IdleTimeout = DefaultIdleTimeout
	}
}

// watermarker is the deterministic watermark state machine of a split: it
// is fed observations and clock readings, and does no I/O.
type watermarker struct {
	bound    mtime.Duration
	idle     mtime.Duration // < 0: never idle
	maxEvent mtime.Time
	wm       mtime.Time
	// lastBusy is the processing time at which the subscription last had
	// something to deliver.
	lastBusy mtime.Time
}

func newWatermarker(p WatermarkPolicy, now mtime.Time) *watermarker {
	idle := mtime.Duration(-1)
	if p.IdleTimeout > 0 {
		idle = mtime.FromDuration(p.IdleTimeout)
	}
	return &watermarker{
		bound:    mtime.FromDuration(p.MaxOutOfOrderness),
		idle:     idle,
		maxEvent: mtime.MinTimestamp,
		wm:       mtime.MinTimestamp,
		lastBusy: now,
	}
}

// observe records the event time of an accepted element.
func (w *watermarker) observe(t mtime.Time) {
	if t > w.maxEvent {
		w.maxEvent = t
		w.wm = mtime.Max(w.wm, t.Add(-w.bound))
	}
}

// busy records that the subscription had messages to deliver at now.
func (w *watermarker) busy(now mtime.Time) { w.lastBusy = mtime.Max(w.lastBusy, now) }

// current returns the watermark at processing time now. caughtUp says the
// last fetch found nothing to deliver.
func (w *watermarker) current(now mtime.Time, caughtUp bool) mtime.Time {
	if caughtUp && w.idle >= 0 && now >= w.lastBusy.Add(w.idle) {
		w.wm = mtime.Max(w.wm, now.Add(-w.bound))
	}
	return w.wm
}
