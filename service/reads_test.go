package service

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"
)

// The tests of this file hold an update's or a rescale's pause open (the
// paused hook blocks until released) and check that the reads of the
// service answer meanwhile. A read that waited for the handover could not
// answer before the release, which comes only after every read returned:
// the deadline is a failure detector, not a measure of speed.

// readDeadline is how long a read may take while a pause is held before
// the test concludes that it waits for the pause.
const readDeadline = 10 * time.Second

// holdPauses makes every update and rescale of s stop while its old
// execution is paused: the paused job's ID arrives on paused, and the
// pause goes on until release is called (at the latest when the test ends).
// Call it before the update starts.
func holdPauses(t *testing.T, s *Service) (paused <-chan string, release func()) {
	t.Helper()
	ids := make(chan string, 4)
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	s.core.Hooks.Paused = func(id string) {
		ids <- id
		<-gate
	}
	t.Cleanup(release) // before the service's Close (cleanups run last first)
	return ids, release
}

// submitCheckpointed submits streamingYAML as job "sums" and waits for its
// first checkpoint. (Its keyed step's snapshot is what completes a pause's
// checkpoint, after the source marked itself paused.)
func submitCheckpointed(t *testing.T, s *Service, base string) *record.Job {
	t.Helper()
	j := submit(t, s, "sums", streamingYAML, base)
	if !j.Checkpointing {
		t.Fatalf("the job takes no checkpoints: %s", j.CheckpointNote)
	}
	return waitFor(t, s, j.ID, "a checkpoint", checkpointed(1))
}

// waitPaused waits until an update or rescale holds a pause open and
// returns the paused job's ID.
func waitPaused(t *testing.T, paused <-chan string) string {
	t.Helper()
	select {
	case id := <-paused:
		return id
	case <-time.After(20 * time.Second):
		t.Fatal("the update never paused its job")
		return ""
	}
}

// mustAnswer fails the test unless read returns (with a nil error) while
// the pause is held.
func mustAnswer(t *testing.T, what string, read func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- read() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s while the job is paused: %v", what, err)
		}
	case <-time.After(readDeadline):
		t.Fatalf("%s did not answer within %s while the job was held paused: it waits for the handover", what, readDeadline)
	}
}

// readsAnswer checks every read the API's describe, list and metrics make
// while job old of name is paused, and that they show old still running.
func readsAnswer(t *testing.T, s *Service, name string, old *record.Job) {
	t.Helper()
	isOld := func(j *record.Job) error {
		if j.ID != old.ID || j.State != record.StateRunning {
			return fmt.Errorf("job %s %s, want the paused job %s still RUNNING", j.ID, j.State, old.ID)
		}
		return nil
	}
	mustAnswer(t, "Get by name", func() error {
		j, err := s.Get(name)
		if err != nil {
			return err
		}
		return isOld(j)
	})
	mustAnswer(t, "Get by ID", func() error {
		j, err := s.Get(old.ID)
		if err != nil {
			return err
		}
		return isOld(j)
	})
	for _, st := range []Status{StatusAll, StatusActive} {
		mustAnswer(t, "List "+string(st), func() error {
			jobs, err := s.List(st)
			if err != nil {
				return err
			}
			if len(jobs) != 1 {
				return fmt.Errorf("%d jobs, want the paused one", len(jobs))
			}
			return isOld(jobs[0])
		})
	}
	mustAnswer(t, "History", func() error {
		jobs, _, err := s.History(name)
		if err != nil {
			return err
		}
		if len(jobs) != 1 {
			return fmt.Errorf("%d jobs, want the paused one", len(jobs))
		}
		return isOld(jobs[0])
	})
	mustAnswer(t, "Metrics", func() error {
		m, err := s.Metrics(name)
		if err != nil {
			return err
		}
		if m == nil || len(m.Steps) == 0 {
			return fmt.Errorf("no live metrics: %+v", m)
		}
		return nil
	})
	mustAnswer(t, "RunningMetrics", func() error {
		for sum := range s.RunningMetrics() {
			if sum.ID == old.ID {
				return nil
			}
		}
		return fmt.Errorf("the paused job %s is not among the running jobs' metrics", old.ID)
	})
	mustAnswer(t, "ElementsRead", func() error {
		if p, ok := s.ElementsRead(name); !ok || p.JobID != old.ID {
			return fmt.Errorf("progress %+v, %v: want the paused job's", p, ok)
		}
		return nil
	})
}

// TestReadsAnswerDuringUpdatePause: while an update holds the old
// execution paused, describe, list, history and metrics answer (showing
// the old job still running); once released, the update completes.
func TestReadsAnswerDuringUpdatePause(t *testing.T) {
	t.Parallel()
	s := openService(t, t.TempDir())
	paused, release := holdPauses(t, s)
	base := t.TempDir()
	old := submitCheckpointed(t, s, base)

	type outcome struct {
		res *UpdateResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := s.Update(context.Background(), UpdateRequest{
			SubmitRequest: SubmitRequest{Name: "sums", Pipeline: streamingYAML, PipelineFile: "sums.yaml", BaseDir: base}})
		done <- outcome{res, err}
	}()
	if id := waitPaused(t, paused); id != old.ID {
		t.Fatalf("paused job %s, want %s", id, old.ID)
	}
	readsAnswer(t, s, "sums", old)
	release()

	var o outcome
	select {
	case o = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the update did not complete after its pause was released")
	}
	if o.err != nil || o.res.Job == nil {
		t.Fatalf("update: %+v %v", o.res, o.err)
	}
	nj := o.res.Job
	if nj.State != record.StateRunning || nj.ReplacesJobID != old.ID || nj.Generation != 2 {
		t.Errorf("new job: %s replaces %q generation %d", nj.State, nj.ReplacesJobID, nj.Generation)
	}
	o2, err := s.Get(old.ID)
	if err != nil {
		t.Fatal(err)
	}
	if o2.State != record.StateUpdated || o2.ReplacedByJobID != nj.ID || o2.LastCheckpoint == nil {
		t.Fatalf("old job: %s replaced by %q, checkpoint %+v", o2.State, o2.ReplacedByJobID, o2.LastCheckpoint)
	}
	if j, err := s.Get("sums"); err != nil || j.ID != nj.ID {
		t.Errorf("the name resolves to %v (%v), want the new job %s", j, err, nj.ID)
	}
	// The new job checkpoints on from the handover.
	waitFor(t, s, nj.ID, "a checkpoint after the handover", checkpointed(o2.LastCheckpoint.Epoch+1))
	if ids := s.core.RunningIDs(); len(ids) != 1 || ids[0] != nj.ID {
		t.Errorf("running executions %v, want only the new job's", ids)
	}
	if _, err := s.Cancel(context.Background(), "sums"); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, nj.ID, record.StateCancelled)
}

// TestReadsAnswerDuringRescalePause: while a rescale holds the execution
// paused, the same reads answer; once released, the job runs on with the
// new worker count (same job ID).
func TestReadsAnswerDuringRescalePause(t *testing.T) {
	t.Parallel()
	s := openService(t, t.TempDir())
	paused, release := holdPauses(t, s)
	j := submitCheckpointed(t, s, t.TempDir())

	type outcome struct {
		j   *record.Job
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		got, err := s.UpdateOptions(context.Background(), "sums", record.JobOptions{NumWorkers: 2})
		done <- outcome{got, err}
	}()
	if id := waitPaused(t, paused); id != j.ID {
		t.Fatalf("paused job %s, want %s", id, j.ID)
	}
	readsAnswer(t, s, "sums", j)
	release()

	var o outcome
	select {
	case o = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the rescale did not complete after its pause was released")
	}
	if o.err != nil {
		t.Fatalf("rescale: %v", o.err)
	}
	if o.j.ID != j.ID || o.j.Options.NumWorkers != 2 || o.j.State != record.StateRunning {
		t.Fatalf("after the rescale: %s %d %s", o.j.ID, o.j.Options.NumWorkers, o.j.State)
	}
	last := o.j.History[len(o.j.History)-1]
	if !strings.Contains(last.Reason, "rescaled from 1 to 2 workers") {
		t.Errorf("last history entry %+v, want the rescale", last)
	}
	waitFor(t, s, j.ID, "a checkpoint after the rescale", checkpointed(o.j.LastCheckpoint.Epoch+1))
	if ids := s.core.RunningIDs(); len(ids) != 1 || ids[0] != j.ID {
		t.Errorf("running executions %v, want the job's one", ids)
	}
	if _, err := s.Cancel(context.Background(), "sums"); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, j.ID, record.StateCancelled)
}

// TestDrainWaitsForUpdate: a drain requested while an update holds the job
// paused does not act on the paused job; it waits for the handover and
// then drains the new job, which ends DRAINED while the old one stays
// UPDATED.
func TestDrainWaitsForUpdate(t *testing.T) {
	t.Parallel()
	s := openService(t, t.TempDir())
	paused, release := holdPauses(t, s)
	base := t.TempDir()
	old := submitCheckpointed(t, s, base)

	updated := make(chan error, 1)
	go func() {
		_, err := s.Update(context.Background(), UpdateRequest{
			SubmitRequest: SubmitRequest{Name: "sums", Pipeline: streamingYAML, PipelineFile: "sums.yaml", BaseDir: base}})
		updated <- err
	}()
	waitPaused(t, paused)
	type outcome struct {
		j   *record.Job
		err error
	}
	drained := make(chan outcome, 1)
	go func() {
		j, err := s.Drain(context.Background(), "sums")
		drained <- outcome{j, err}
	}()
	// Whether or not the drain has reached the name's guard yet, it cannot
	// have acted: the job is still the paused, running one.
	readsAnswer(t, s, "sums", old)
	select {
	case o := <-drained:
		t.Fatalf("the drain returned while the update held the job paused: %+v %v", o.j, o.err)
	default:
	}
	release()
	if err := <-updated; err != nil {
		t.Fatalf("update: %v", err)
	}
	o := <-drained
	if o.err != nil {
		t.Fatalf("drain: %v", o.err)
	}
	if o.j.ID == old.ID || o.j.ReplacesJobID != old.ID || o.j.State != record.StateDraining {
		t.Fatalf("the drain acted on job %s (%s, replaces %q), want the new job DRAINING", o.j.ID, o.j.State, o.j.ReplacesJobID)
	}
	if d := waitState(t, s, o.j.ID, record.StateDrained); d.State != record.StateDrained {
		t.Fatalf("new job ended %s (%s)", d.State, d.Error)
	}
	if j, err := s.Get(old.ID); err != nil || j.State != record.StateUpdated {
		t.Fatalf("old job: %v %v", j, err)
	}
}

// TestSecondUpdateRefusedWhileUpdating: while an update holds its pause,
// another update or a rescale of the same job is refused at once with
// UPDATE_IN_PROGRESS (rather than queueing and replacing the job the first
// update starts); the first update then completes.
func TestSecondUpdateRefusedWhileUpdating(t *testing.T) {
	t.Parallel()
	s := openService(t, t.TempDir())
	paused, release := holdPauses(t, s)
	base := t.TempDir()
	old := submitCheckpointed(t, s, base)
	req := UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: streamingYAML, PipelineFile: "sums.yaml", BaseDir: base}}
	done := make(chan error, 1)
	go func() {
		_, err := s.Update(context.Background(), req)
		done <- err
	}()
	waitPaused(t, paused)
	refused := func(what string, call func() error) {
		t.Helper()
		mustAnswer(t, what, func() error {
			if err := call(); !hasCode(err, errcode.UpdateInProgress) {
				return fmt.Errorf("got %v, want UPDATE_IN_PROGRESS", err)
			}
			return nil
		})
	}
	for i := 0; i < 3; i++ {
		refused("a second update", func() error { _, err := s.Update(context.Background(), req); return err })
	}
	refused("a rescale by ID", func() error {
		_, err := s.UpdateOptions(context.Background(), old.ID, record.JobOptions{NumWorkers: 2})
		return err
	})
	release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the first update: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the first update did not complete after its pause was released")
	}
	h, _, err := s.History("sums")
	if err != nil || len(h) != 2 {
		t.Fatalf("history: %d jobs (%v), want the old and the one new job", len(h), err)
	}
	// Once the update is over, the next one is accepted.
	if _, err := s.Update(context.Background(), req); err != nil {
		t.Errorf("an update after the first finished: %v", err)
	}
}

// TestReadsAnswerWhileResuming: after a restart the service answers at
// once; a job not resumed yet (its resumption held open) reads RUNNING
// with condition RESUMING, and once it has resumed the condition is gone
// and it checkpoints on.
func TestReadsAnswerWhileResuming(t *testing.T) {
	t.Parallel()
	dir, base := t.TempDir(), t.TempDir()
	s := openService(t, dir)
	old := submitCheckpointed(t, s, base)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	held := make(chan string, 1)
	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	s2, err := open(context.Background(), Options{DataDir: dir, CheckpointInterval: 50 * time.Millisecond, Clock: testClock{base: time.Now()}},
		Hooks{Resuming: func(id string) { held <- id; <-gate }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s2.Close(context.Background()) })
	t.Cleanup(release)
	if id := <-held; id != old.ID {
		t.Fatalf("resuming %s, want %s", id, old.ID)
	}
	mustAnswer(t, "Get while resuming", func() error {
		j, err := s2.Get("sums")
		if err != nil {
			return err
		}
		if j.State != record.StateRunning || j.Condition == nil || j.Condition.Code != errcode.Resuming {
			return fmt.Errorf("job %s condition %+v, want RUNNING with RESUMING", j.State, j.Condition)
		}
		return nil
	})
	mustAnswer(t, "List while resuming", func() error {
		jobs, err := s2.List(StatusActive)
		if err != nil {
			return err
		}
		if len(jobs) != 1 || jobs[0].Condition == nil || jobs[0].Condition.Code != errcode.Resuming {
			return fmt.Errorf("jobs %+v, want the one resuming", jobs)
		}
		return nil
	})
	select {
	case <-s2.Recovered():
		t.Fatal("recovery finished while a job was held")
	default:
	}
	release()
	select {
	case <-s2.Recovered():
	case <-time.After(30 * time.Second):
		t.Fatal("recovery did not finish after the release")
	}
	j := waitFor(t, s2, old.ID, "a checkpoint after resuming", checkpointed(old.LastCheckpoint.Epoch+2))
	if j.Condition != nil {
		t.Errorf("condition %+v after resuming, want none", j.Condition)
	}
}
