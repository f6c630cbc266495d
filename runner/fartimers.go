package runner

import "github.com/weir-dev/weir/mtime"

// farTimerAt: an event-time timer at or after the end of the global
// window can only be due once the watermark passes that end, which
// happens once, when the input ends (a drain, a bounded input's end).
// An aggregation keeps no heap entry for such timers: it counts them
// (farTimers) and, when the watermark reaches the earliest, loads them
// from its keys' windows. In the global window every key has two of them
// (its on-time pane and its expiry); at a million keys the heap held two
// million entries (≈110 MB) that the garbage collector marked on every
// cycle while a streaming job ran.
const farTimerAt = mtime.EndOfGlobalWindow

// farTimers is the count of an aggregation's event-time timers kept out
// of its heap, and the earliest of them.
type farTimers struct {
	n   int
	min mtime.Time
	// done is set once they were loaded: later ones go to the heap.
	done bool
}

// keep counts a timer at t kept out of the heap and reports true, or
// reports false when it belongs in the heap.
func (f *farTimers) keep(t mtime.Time) bool {
	if t < mtime.EndOfGlobalWindow || f.done {
		return false
	}
	if f.n == 0 || t < f.min {
		f.min = t
	}
	f.n++
	return true
}

// due reports whether the timers kept out are due at watermark wm (and so
// must be loaded first).
func (f *farTimers) due(wm mtime.Time) bool { return f.n > 0 && eventTimerDue(f.min, wm) }

// loaded records that the timers kept out are in the heap now.
func (f *farTimers) loaded() { f.n, f.done = 0, true }

// join adds another instance's timers kept out (key groups moving between
// workers in a rescale): the count is a bound, as the heap's lazily checked
// entries are, and loading finds the windows the instance holds.
func (f *farTimers) join(o farTimers) {
	if o.n > 0 {
		if f.n == 0 || o.min < f.min {
			f.min = o.min
		}
		f.n += o.n
	}
	f.done = f.done || o.done
}
