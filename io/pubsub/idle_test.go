package pubsub

import (
	"context"
	"testing"
	"time"

	"github.com/weir-dev/weir/runner/contract"
)

// TestIdleSplitRingsOnPublish: an idle split stops asking the broker and
// listens to its topic instead; a publish wakes it at once (its poll
// interval here is an hour), and a worker with work cuts its wait short.
func TestIdleSplitRingsOnPublish(t *testing.T) {
	b := newTestBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := b.CreateTopic(ctx, "quiet", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	src, err := NewSource(b, SourceConfig{Step: "Read", Topic: "quiet", Subscription: "quiet--Read", Schema: orderSchema,
		IdlePollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	splits, err := src.Split(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	sp := splits[0].(*split)
	defer sp.Close()
	buf := make([]contract.Element, 16)
	// Empty reads make it idle; the first idle read hangs the doorbell.
	for sp.bellSub == nil {
		if res, err := sp.ReadIdle(ctx, buf); err != nil || res.N != 0 {
			t.Fatalf("reading an empty topic: %v %v", res, err)
		}
	}
	// The worker has work: the wait ends at once, nothing read, the
	// doorbell stays.
	cut, stop := context.WithCancel(ctx)
	stop()
	if res, err := sp.ReadIdle(cut, buf); err == nil || res.N != 0 || sp.bellSub == nil {
		t.Fatalf("a cut-short idle read: %v %v, doorbell %v", res, err, sp.bellSub != nil)
	}
	if _, err := b.Publish(ctx, "quiet", []byte(`{"region":"N","amount":7,"ts":"2026-03-01T00:00:00Z"}`), nil, ""); err != nil {
		t.Fatal(err)
	}
	n := 0
	for n == 0 {
		res, err := sp.ReadIdle(ctx, buf)
		if err != nil {
			t.Fatalf("the published message did not wake the idle split: %v", err)
		}
		n = res.N
	}
	if n != 1 || sp.bellSub != nil {
		t.Errorf("read %d messages; doorbell still hung: %v (want 1, hung up once messages flow)", n, sp.bellSub != nil)
	}
}
