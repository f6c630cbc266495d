package runner

import (
	"github.com/weir-dev/weir/mtime"
)

// This file declares the control messages that flow in order with the
// data (watermarks, processing-time ticks, checkpoint barriers) and the
// processing time a receiver sees.

// ctrlKind says what a control message carries.
type ctrlKind int

const (
	// ctrlWatermark carries the sender's output watermark in wm.
	ctrlWatermark ctrlKind = iota
	// ctrlTick says processing time moved to now (TestStream): re-evaluate
	// processing-time timers.
	ctrlTick
	// ctrlBarrier is a checkpoint barrier for epoch.
	ctrlBarrier
)

// ctrl is a control message. Receivers handle it in order with the data:
// the keyed nodes through keyed.controlAligned (keyed.go), the side-input
// node and the transactional sink through their own controlAligned, behind
// a barrier aligner in a checkpointed execution (barrier.go).
type ctrl struct {
	kind   ctrlKind
	sender int // root instance id: rootIndex*workers + worker
	// wm is the watermark of a ctrlWatermark.
	wm mtime.Time
	// now is the processing time of a ctrlTick.
	now   mtime.Time
	epoch uint64
}

// procClock is the processing time a receiver sees: the wall clock, or in
// manual mode the time carried by the last tick it received, so that every
// worker sees processing time move at the same point of the stream.
type procClock struct {
	r    *run
	tick mtime.Time
}

func (c *procClock) now() mtime.Time {
	if c.r.manual {
		return c.tick
	}
	return c.r.opts.Clock.Now()
}
