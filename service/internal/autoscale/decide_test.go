package autoscale

import (
	"strings"
	"testing"
	"time"
)

// sim is a job the autoscaler scales: input arrives at rate elements a
// second, each worker reads at most capacity a second, what is not read
// waits in the backlog. Every step advances 5 s and samples it.
type sim struct {
	t        time.Time
	workers  int
	capacity float64
	rate     float64
	backlog  float64
	read     float64
	idle     float64 // ns
	exec     time.Time
	// sink, when above 0, is the elements a second the job's sinks
	// commit: the workers read no more, and wait for them the rest of
	// their time (sinkWait, ms).
	sink     float64
	sinkWait float64
}

func (m *sim) advance(dt time.Duration) Sample {
	sec := dt.Seconds()
	can := float64(m.workers) * m.capacity * sec
	want := m.rate*sec + m.backlog
	done := min(can, want)
	if m.sink > 0 && m.sink*sec < done {
		done = m.sink * sec
		m.sinkWait += float64(m.workers) * sec * 1e3 * (1 - done/can)
	}
	m.backlog = want - done
	m.read += done
	m.idle += float64(m.workers) * sec * 1e9 * (1 - done/can)
	m.t = m.t.Add(dt)
	return Sample{Time: m.t, Workers: m.workers, Read: int64(m.read), Backlog: int64(m.backlog), HasBacklog: true, IdleNanos: int64(m.idle),
		SinkWaitMillis: int64(m.sinkWait), Execution: m.exec}
}

// run steps the autoscaler over the simulation for d, applying each
// decision as the service does (a rescale starts a new execution), and
// returns the decisions that changed the count, with when.
func (m *sim) run(st *State, set Settings, d time.Duration) (changes []Decision, at []time.Duration) {
	start := m.t
	for m.t.Sub(start) < d {
		dec := st.Step(m.advance(5*time.Second), set)
		if dec.Workers != m.workers {
			changes, at = append(changes, dec), append(at, m.t.Sub(start))
			m.workers, m.exec = dec.Workers, m.t
		}
	}
	return changes, at
}

func defaults(minW, maxW int) Settings {
	return Settings{Min: minW, Max: maxW, Hint: DefaultHint, UpDelay: DefaultUpDelay, DownDelay: DefaultDownDelay,
		Cooldown: DefaultCooldown, DrainTarget: DefaultDrainTarget}
}

// TestStepUpConverges: the input rate steps from what one worker carries to
// three times that: within 30 s of the backlog starting to grow the
// autoscaler scales up, and it converges on the count that keeps up at the
// target utilisation in at most two changes, never above the maximum.
func TestStepUpConverges(t *testing.T) {
	m := &sim{t: time.Unix(0, 0), workers: 1, capacity: 1000, rate: 600}
	st := &State{}
	set := defaults(1, 8)
	if ch, _ := m.run(st, set, 2*time.Minute); len(ch) != 0 {
		t.Fatalf("a job that keeps up was scaled: %+v", ch)
	}
	m.rate = 2400 // needs 2400/(1000*0.8) = 3 workers
	ch, at := m.run(st, set, 5*time.Minute)
	if len(ch) == 0 || len(ch) > 2 {
		t.Fatalf("changes after the step up: %+v, want 1 or 2", ch)
	}
	t.Logf("step 1→3 workers' worth of input: first change after %s, %d change(s), %d workers, backlog after 5 min %.0f", at[0], len(ch), ch[len(ch)-1].Workers, m.backlog)
	if at[0] > 30*time.Second {
		t.Errorf("first scale-up %s after the step, want within 30s", at[0])
	}
	if got := ch[len(ch)-1].Workers; got < 3 || got > set.Max {
		t.Errorf("converged on %d workers, want at least 3 (and at most %d)", got, set.Max)
	}
	if m.backlog > 2400*5 {
		t.Errorf("the backlog is still %0.f after 5 minutes", m.backlog)
	}
	f := ch[0].Figures
	if f.Backlog <= 0 || f.BacklogGrowth <= 0 || f.ProcessingRate <= 0 || f.Capacity <= 0 || f.PredictedRate <= 0 {
		t.Errorf("the decision's figures are missing: %+v", f)
	}
}

// TestMaximumBounds: an input no number of workers within the range can
// carry scales to the maximum and no further.
func TestMaximumBounds(t *testing.T) {
	m := &sim{t: time.Unix(0, 0), workers: 2, capacity: 1000, rate: 100000}
	ch, _ := m.run(&State{}, defaults(1, 4), 10*time.Minute)
	if m.workers != 4 {
		t.Fatalf("workers %d (changes %+v), want the maximum 4", m.workers, ch)
	}
	for _, c := range ch {
		if c.Workers > 4 {
			t.Fatalf("scaled to %d, above the maximum", c.Workers)
		}
	}
}

// TestStepDownAfterStablePeriod: after the input drops, the autoscaler
// waits the stable period (10 minutes) before it scales down, to the count
// that carries the input at the target, never below the minimum.
func TestStepDownAfterStablePeriod(t *testing.T) {
	m := &sim{t: time.Unix(0, 0), workers: 4, capacity: 1000, rate: 500}
	st := &State{}
	set := defaults(2, 8)
	ch, at := m.run(st, set, 20*time.Minute)
	if len(ch) != 1 {
		t.Fatalf("changes %+v, want one scale-down", ch)
	}
	t.Logf("step down to a sixth: scale-down after %s, to %d workers", at[0], ch[0].Workers)
	if at[0] < set.DownDelay {
		t.Errorf("scaled down %s after the drop, before the stable period %s", at[0], set.DownDelay)
	}
	if ch[0].Workers != 2 {
		t.Errorf("scaled down to %d, want the minimum 2 (500/s needs one worker)", ch[0].Workers)
	}
}

// TestNoChangeWhileMeasuring: right after a change (a new execution) the
// autoscaler measures for its cooldown before it decides again.
func TestNoChangeWhileMeasuring(t *testing.T) {
	st := &State{}
	set := defaults(1, 8)
	t0 := time.Unix(0, 0)
	exec := t0
	s := func(sec int, read, backlog int64) Sample {
		return Sample{Time: t0.Add(time.Duration(sec) * time.Second), Workers: 2, Read: read, Backlog: backlog, HasBacklog: true, Execution: exec}
	}
	st.Step(s(0, 0, 0), set)
	st.Step(Sample{Time: t0.Add(5 * time.Second), Workers: 1, Execution: t0}, set) // the previous execution
	for sec := 10; sec < 30; sec += 5 {
		if d := st.Step(s(sec, int64(sec)*1000, int64(sec)*10000), set); d.Workers != 2 {
			t.Fatalf("at %ds (cooldown from the change) decided %d workers: %s", sec, d.Workers, d.Reason)
		}
	}
}

// TestIntoTheRange: a count outside a changed range moves into it at
// once.
func TestIntoTheRange(t *testing.T) {
	st := &State{}
	t0 := time.Unix(0, 0)
	st.Step(Sample{Time: t0, Workers: 6, Execution: t0}, defaults(1, 4))
	d := st.Step(Sample{Time: t0.Add(5 * time.Second), Workers: 6, Execution: t0}, defaults(1, 4))
	if d.Workers != 4 {
		t.Fatalf("6 workers with the range [1, 4]: decided %d, want 4", d.Workers)
	}
}

// TestSinkBoundJobIsNotScaledUp: a job whose sinks commit slower than its
// input arrives builds a backlog while its workers wait for the sinks;
// more workers would wait too, so none is added however long the backlog
// grows, and the decision says why. Once the sinks keep up again, the
// backlog left is a reason to scale up as usual, at once.
func TestSinkBoundJobIsNotScaledUp(t *testing.T) {
	m := &sim{t: time.Unix(0, 0), workers: 1, capacity: 1000, rate: 2400, sink: 600}
	st := &State{}
	set := defaults(1, 8)
	if ch, _ := m.run(st, set, 5*time.Minute); len(ch) != 0 {
		t.Fatalf("a job held back by its sinks was scaled: %+v", ch)
	}
	d := st.Step(m.advance(5*time.Second), set)
	if d.Workers != 1 || !strings.Contains(d.Reason, "the sinks, not the workers") || d.Figures.SinkWait < SinkBound {
		t.Fatalf("decision %+v: want 1 worker, the sinks named as the reason and their share of the time", d)
	}
	m.sink = 0 // the sinks keep up again
	ch, at := m.run(st, set, time.Minute)
	if len(ch) == 0 || at[0] > 10*time.Second || ch[0].Workers < 3 {
		t.Fatalf("after the sinks kept up: changes %+v at %v, want at least 3 workers within 10 s", ch, at)
	}
}
