package core

import (
	"fmt"
	"time"

	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/service/record"
)

// A job whose sinks commit slower than its input arrives reads no faster
// than they commit: its execution stops reading while the sinks hold
// more than Options.MaxSinkBuffer (runner.Options.MaxSinkBuffer). That
// is no fault — nothing is lost, the input waits in its topic — but the
// job falls behind, and its user must be able to see why: the
// supervisor turns the execution's wait into a job event, once every
// SinkWaitEventEvery at most while it lasts, and the job's metrics carry
// it (sink_wait_seconds, sink_buffered_bytes).

// SinkWaitEventEvery is how often, at most, a job's execution records an
// EventSinkBackpressure.
const SinkWaitEventEvery = 10 * time.Minute

// sinkWaitWatch is what the supervisor saw of an execution's waits for
// its sinks. Only the execution's supervisor reads and writes it; when
// the last event was recorded is Run.sinkToldAt, which the execution
// replacing this one at a rescale starts from.
type sinkWaitWatch struct {
	// seen is the execution's SinkWaitMillis at the last sample.
	seen int64
	// pending is the wait (ms, summed over workers) not yet told, since
	// from; from is zero when nothing is pending.
	pending int64
	from    time.Time
	// last is the previous sample's time.
	last time.Time
}

// noteSinkWait records, from the execution's counters res sampled at now,
// an EventSinkBackpressure when jr's sources waited for its sinks since
// the last event and SinkWaitEventEvery has passed since it.
func (s *Core) noteSinkWait(jr *Run, now time.Time, res *runner.Result) {
	w := &jr.sinkWait
	prev := w.last
	w.last = now
	if res == nil {
		return
	}
	d := res.SinkWaitMillis - w.seen
	w.seen = res.SinkWaitMillis
	if d > 0 {
		if w.pending == 0 {
			w.from = prev
			if w.from.IsZero() {
				w.from = jr.startedAt
			}
		}
		w.pending += d
	}
	if told := jr.sinkToldAt.Load(); w.pending == 0 || (told != 0 && now.Sub(time.Unix(0, told)) < SinkWaitEventEvery) {
		return
	}
	workers := max(res.Workers, 1)
	waited := float64(w.pending) / 1000 / float64(workers)
	over := now.Sub(w.from).Seconds()
	frac := 0.0
	if over > 0 {
		frac = min(waited/over, 1)
	}
	msg := fmt.Sprintf("the sources waited %s s of the last %s s for the sinks to commit: the sinks held more than %s between two checkpoints, so the job reads no faster than they commit (a shorter --checkpoint-interval commits smaller batches; the server's --max-sink-buffer sets the bound)",
		secondsText(waited), secondsText(over), byteSize(s.Opts.MaxSinkBuffer))
	s.EmitRun(jr, record.EventSinkBackpressure, record.SeverityWarning, msg, map[string]any{
		"waited_seconds": waited, "over_seconds": over, "waited_fraction": frac,
		"held_bytes": res.SinkBufferedBytes, "max_bytes": s.Opts.MaxSinkBuffer,
	})
	w.pending, w.from = 0, time.Time{}
	jr.sinkToldAt.Store(now.UnixNano())
}

// inheritSinkWait starts jr's watch from the last sink_backpressure event
// of old, the execution of the same job it replaces. Called before jr's
// supervisor starts; old's supervisor may still run (sinkToldAt is atomic).
func inheritSinkWait(jr, old *Run) { jr.sinkToldAt.Store(old.sinkToldAt.Load()) }

// secondsText formats seconds for a message: 12.5, 0.048 (a short wait
// is not rounded away to 0.0).
func secondsText(x float64) string {
	if x < 1 {
		return fmt.Sprintf("%.3f", x)
	}
	return fmt.Sprintf("%.1f", x)
}

// byteSize formats n bytes for a message: 64 MiB, 1.5 GiB, 900 KiB, 12 B.
func byteSize(n int64) string {
	units := []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	for _, u := range units {
		if n >= u.size {
			if n%u.size == 0 {
				return fmt.Sprintf("%d %s", n/u.size, u.name)
			}
			return fmt.Sprintf("%.1f %s", float64(n)/float64(u.size), u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}
