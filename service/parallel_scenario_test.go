package service

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/io/pubsub"
)

// The start, overlap and end that the overlap and rollback scenarios of
// a parallel replacement share (replace_parallel_test.go,
// rollback_test.go): job "sums" runs parYAML into the first driver's
// table, reads phase 1, is replaced in parallel, both jobs read phase 2,
// and at the end the job kept reads phase 3 and is drained, and the
// view's consumer is checked against the ground truth.

// parScenario is a parallel scenario under way.
type parScenario struct {
	s        *Service
	b        *pubsub.Broker
	clock    *shiftClock
	dir      string
	view     *viewReader
	pipeline string
	// base is the start of the event times: half an hour ahead of the
	// wall clock, so that an idle subscription's watermark (processing
	// time) never makes them late.
	base time.Time
	// old is the job the scenario starts with.
	old *record.Job
	// phase1 is what old read before the replacement (seconds 0 to 33).
	phase1 []srEvent
}

// startParScenario opens a service with the parallel topics (openParallel)
// and the first driver's table, and submits job "sums", which reads phase
// 1 (seconds 0 to 33 from base).
func startParScenario(t *testing.T) *parScenario {
	t.Helper()
	dir := t.TempDir()
	s, b, clock := openParallel(t, dir)
	sinkCfg, view := parDrivers()[0].setup(t, dir)
	t.Cleanup(view.close)
	sc := &parScenario{s: s, b: b, clock: clock, dir: dir, view: view, pipeline: fmt.Sprintf(parYAML, sinkCfg),
		base: time.Now().Add(30 * time.Minute).Truncate(time.Minute)}
	sc.old = submit(t, s, "sums", sc.pipeline, dir)
	sc.phase1 = parEvents(sc.base, 0, 34, 1)
	publishPar(t, b, sc.phase1)
	waitElements(t, s, sc.old.ID, "Events", int64(len(sc.phase1)))
	return sc
}

// acked waits until the old job acknowledged phase 1 (its messages are
// committed) and starts a consumer of the view.
func (sc *parScenario) acked(t *testing.T) *consumer {
	t.Helper()
	waitAcked(t, sc.s, sc.b, pubsub.SubscriptionName("sums", "Events"))
	return startConsumer(sc.s, sc.view)
}

// parallelOverlapOptions are the service options of a parallel
// replacement that stays in its overlap (the minimum parallel duration
// is an hour of the service's clock) and does not re-read.
var parallelOverlapOptions = []string{"parallel_replace_job_min_parallel_pipelines_duration=1h", "weir_replace_rewind=false"}

// update replaces "sums" in parallel by the same pipeline with the
// service options opts (besides the strategy's), once the minimum
// interval between replacements has passed, and returns the new job.
func (sc *parScenario) update(t *testing.T, opts ...string) *record.Job {
	t.Helper()
	sc.clock.advance(DefaultMinReplaceInterval)
	res, err := sc.s.Update(context.Background(), UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: sc.pipeline, BaseDir: sc.dir,
		ServiceOptions: append([]string{"update_strategy_parallel_job_update"}, opts...)}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Job
}

// overlap publishes phase 2 (seconds 35 to 69) and waits until both the
// old job and the new job nj read it and committed their rows of the
// windows both fired (two more checkpoints of each): the new job's first
// commit is what puts its generation behind the view, beside the old
// job's. It returns phase 2.
func (sc *parScenario) overlap(t *testing.T, nj *record.Job) []srEvent {
	t.Helper()
	phase2 := parEvents(sc.base, 35, 70, 1000)
	publishPar(t, sc.b, phase2)
	waitElements(t, sc.s, nj.ID, "Events", int64(len(phase2)))
	waitElements(t, sc.s, sc.old.ID, "Events", int64(len(sc.phase1)+len(phase2)))
	waitCheckpointsAfter(t, sc.s, 2, sc.old.ID, nj.ID)
	return phase2
}

// drainToTruth publishes phase 3 (seconds 70 to 89), waits until job id
// (the job kept) runs, has read it besides the read messages it had read
// before and has acknowledged everything on the name's subscription (a
// job restored from a snapshot re-reads an unknown number of messages
// before phase 3: a drain before they are all read would fire phase 3's
// windows with part of their input, as Beam's drain does), drains it,
// and checks that what cons saw last equals the ground truth of phase 1,
// phase2 and phase 3. It returns all three.
func (sc *parScenario) drainToTruth(t *testing.T, cons *consumer, id string, read int, phase2 []srEvent) []srEvent {
	t.Helper()
	phase3 := parEvents(sc.base, 70, 90, 5000)
	publishPar(t, sc.b, phase3)
	waitFor(t, sc.s, id, "its execution", func(j *record.Job) bool { return sc.s.core.RunningJob(j.ID) != nil })
	waitElements(t, sc.s, id, "Events", int64(read+len(phase3)))
	waitAcked(t, sc.s, sc.b, pubsub.SubscriptionName("sums", "Events"))
	if _, err := sc.s.Drain(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, sc.s, id, "DRAINED and committed", drainedAndCommitted)
	all := append(append(append([]srEvent{}, sc.phase1...), phase2...), phase3...)
	if diff := diffTotals(cons.finish(t), parTruth(all)); diff != "" {
		t.Fatalf("the view against the ground truth:\n%s", diff)
	}
	return all
}

// waitCheckpointsAfter waits until each of the jobs ids has taken n more
// checkpoints than it had when called: with n = 2, one whole checkpoint
// (and its commit) began after the call.
func waitCheckpointsAfter(t *testing.T, s *Service, n uint64, ids ...string) {
	t.Helper()
	for _, id := range ids {
		j, err := s.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		var epoch uint64
		if j.LastCheckpoint != nil {
			epoch = j.LastCheckpoint.Epoch
		}
		waitFor(t, s, id, fmt.Sprintf("%d more checkpoints", n), checkpointed(epoch+n))
	}
}

// viewPoller is what the consumers of a view (consumer, elemConsumer)
// share: a poll at every change of the service until stopped, and the
// violations their polls record, under mu.
type viewPoller struct {
	mu         sync.Mutex
	reads      int
	violations []string
	stop, done chan struct{}
}

// start calls poll at once and after every change of s, until end.
func (p *viewPoller) start(s *Service, poll func()) {
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		for {
			changed := s.core.Changes.Next()
			poll()
			select {
			case <-changed:
			case <-p.stop:
				poll()
				return
			}
		}
	}()
}

// end stops the polling after one last poll and fails t with the
// violations recorded; the consumer's last read is then its own to read.
func (p *viewPoller) end(t *testing.T) {
	t.Helper()
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.violations) > 0 {
		n := min(len(p.violations), 20)
		t.Errorf("the consumer of the view saw %d violation(s) in %d reads, first %d:\n%s", len(p.violations), p.reads, n, strings.Join(p.violations[:n], "\n"))
	}
	t.Logf("the consumer read the view %d times", p.reads)
}
