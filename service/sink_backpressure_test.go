package service

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/service/record"
)

// sinkBackpressureYAML copies a topic to another through the Pub/Sub
// sink, which holds each checkpoint's output until it commits.
const sinkBackpressureYAML = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Events
      config:
        topic: sb-in
        schema: {key: string, n: int}
    - type: WriteToPubSub
      name: Copy
      input: Events
      config: {topic: sb-out}
`

// sinkBoundBytes is the MaxSinkBuffer of the sink backpressure tests:
// a few messages fill it.
const sinkBoundBytes = 256

// startSinkBoundJob opens a service whose jobs' sinks may hold
// sinkBoundBytes between checkpoints, on an embedded broker with the
// topics of sinkBackpressureYAML (and a subscription sb-check to its
// output), and runs that pipeline as job "sb". publish sends messages
// from to to on its input, which the job reads from its start on.
func startSinkBoundJob(t *testing.T) (s *Service, b *pubsub.Broker, j *record.Job, publish func(from, to int)) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	b = startBroker(t, dir, "sb-in", "sb-out")
	if _, err := b.CreateSubscription(ctx, "sb-check", "sb-out", pubsub.SubscriptionConfig{}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, Options{DataDir: filepath.Join(dir, "data"), CheckpointInterval: 50 * time.Millisecond,
		Clock: testClock{base: time.Now()}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Broker: b, MaxSinkBuffer: sinkBoundBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	j = submit(t, s, "sb", sinkBackpressureYAML, dir)
	waitFor(t, s, j.ID, "RUNNING", func(j *record.Job) bool { return j.State == record.StateRunning })
	publish = func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := b.Publish(ctx, "sb-in", fmt.Appendf(nil, `{"key": "k%d", "n": %d}`, i%7, i), nil, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	return s, b, j, publish
}

// TestSinkBackpressureIsAnEvent: a job whose Pub/Sub sink holds more than
// the server's MaxSinkBuffer between checkpoints waits for its sink, and
// its user is told: a sink_backpressure warning with the bound and the
// time waited, and sink_wait_seconds and sink_buffered_bytes in its
// metrics. The wait loses nothing and repeats nothing: every message
// arrives on the output topic once.
func TestSinkBackpressureIsAnEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 3000
	s, b, j, publish := startSinkBoundJob(t)
	publish(0, n)

	waitFor(t, s, j.ID, "a sink_backpressure event", func(*record.Job) bool {
		return len(eventsOf(t, s, j.ID, record.EventSinkBackpressure)) > 0
	})
	ev := eventsOf(t, s, j.ID, record.EventSinkBackpressure)[0]
	if ev.Severity != record.SeverityWarning || !strings.Contains(ev.Message, "--max-sink-buffer") || !strings.Contains(ev.Message, "256 B") {
		t.Errorf("event %s %q: want a warning naming --max-sink-buffer and its 256 B", ev.Severity, ev.Message)
	}
	if w, _ := ev.Details["waited_seconds"].(float64); w <= 0 {
		t.Errorf("event details %v: want waited_seconds above 0", ev.Details)
	}
	if m, _ := ev.Details["max_bytes"].(float64); m != sinkBoundBytes {
		t.Errorf("event details %v: want max_bytes %d", ev.Details, sinkBoundBytes)
	}
	m, err := s.Metrics(j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if m.SinkWaitSeconds <= 0 || m.SinkBufferedBytes == nil {
		t.Errorf("metrics: sink_wait_seconds %v, sink_buffered_bytes %v: want a wait and the sink's bytes", m.SinkWaitSeconds, m.SinkBufferedBytes)
	}

	// Every message once.
	seen := map[int]int{}
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < n && time.Now().Before(deadline) {
		msgs, err := b.Pull(ctx, "sb-check", 1000, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, msg := range msgs {
			var v struct{ N int }
			if err := json.Unmarshal(msg.Data, &v); err != nil {
				t.Fatalf("message %s: %v", msg.Data, err)
			}
			seen[v.N]++
		}
		if len(msgs) == 0 {
			// Nothing yet: the next checkpoint commits more (each
			// checkpoint interval notifies a change).
			select {
			case <-s.core.Changes.Next():
			case <-time.After(time.Second):
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("%d of %d messages arrived", len(seen), n)
	}
	for v, c := range seen {
		if c != 1 {
			t.Errorf("message %d arrived %d times", v, c)
		}
	}
}

// TestSinkBackpressureEventsKeepTheirPaceThroughARescale: a job rescaled
// while its sink holds it back is the same job, and its event log gets no
// second sink_backpressure warning before SinkWaitEventEvery has passed —
// the rescale's new execution waits for the sink too, and says so in the
// job's metrics, not in a new event.
func TestSinkBackpressureEventsKeepTheirPaceThroughARescale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, j, publish := startSinkBoundJob(t)
	publish(0, 1000)
	waitFor(t, s, j.ID, "a sink_backpressure event", func(*record.Job) bool {
		return len(eventsOf(t, s, j.ID, record.EventSinkBackpressure)) > 0
	})
	if _, err := s.UpdateOptions(ctx, j.ID, record.JobOptions{NumWorkers: 2}); err != nil {
		t.Fatalf("rescaling: %v", err)
	}
	publish(1000, 2000)
	waitFor(t, s, j.ID, "the rescaled execution waiting for its sink", func(*record.Job) bool {
		m, err := s.Metrics(j.ID)
		return err == nil && m.SinkWaitSeconds > 0 // the new execution's own count
	})
	// The supervisor samples the execution at every checkpoint interval
	// and notifies a change each time: twenty notices are several samples
	// since the wait.
	for range 20 {
		select {
		case <-s.core.Changes.Next():
		case <-time.After(time.Second):
		}
	}
	evs := eventsOf(t, s, j.ID, record.EventSinkBackpressure)
	if len(evs) != 1 {
		t.Errorf("%d sink_backpressure events, want 1 (the rescale is no new episode): %+v", len(evs), evs)
	}
	for _, ev := range evs {
		// The span is dated in the service's clock, as its samples are.
		if over, _ := ev.Details["over_seconds"].(float64); over < 0 || strings.Contains(ev.Message, " 0.0 s") {
			t.Errorf("event %q: over_seconds %v, want a span of 0 or more and no wait rounded to 0.0", ev.Message, ev.Details["over_seconds"])
		}
	}
}
