package pubsub

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/internal/natscluster"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
)

// TestSourceReportsUnreachableBroker: a split reading an external NATS
// server that goes away reads nothing while the client reconnects, and
// once the connection has been down for UnreachableAfter (on the source's
// clock) a read fails with ErrUnavailable, naming the subscription — the
// error a server job waits out under CONNECTOR_UNAVAILABLE — instead of
// reading nothing for ever. A read while the connection is up again
// starts the count anew.
func TestSourceReportsUnreachableBroker(t *testing.T) {
	t.Parallel()
	ctx := tctx(t)
	nc, b, clock, src := externalSource(t, "gone", 0)
	sp := openSplit(t, src)
	buf := make([]contract.Element, 4)
	if _, err := sp.Read(ctx, buf); err != nil {
		t.Fatalf("read with the server up: %v", err)
	}

	nc.StopServer(0)
	if !await.Until(20*time.Second, 10*time.Millisecond, func() bool { return !b.nc.IsConnected() }) {
		t.Fatal("the client still reports a connection to the stopped server")
	}
	read := func() error {
		t.Helper()
		_, err := sp.Read(ctx, buf)
		return err
	}
	// Reads that find nothing while the client reconnects.
	for range 3 {
		if err := read(); err != nil {
			t.Fatalf("a read with the server just gone: %v, want nothing read and no error (the client reconnects)", err)
		}
	}
	clock.Advance(mtime.FromDuration(59 * time.Second))
	if err := read(); err != nil {
		t.Fatalf("a read 59s into the outage: %v, want none before UnreachableAfter", err)
	}
	clock.Advance(mtime.FromDuration(time.Second))
	err := read()
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, contract.ErrUnavailable) || !strings.Contains(err.Error(), "subscription gone") {
		t.Fatalf("a read a minute into the outage: %v, want ErrUnavailable naming the subscription", err)
	}
}

// TestIdleSourceWakesWhenTheBrokerGoes: an idle split waiting for its
// doorbell (here for up to an hour, IdlePollInterval) stops waiting when
// the connection goes down, and its next reads, polling while the client
// reconnects, report the broker unreachable once the connection has been
// down for UnreachableAfter: a job on an idle subscription learns it
// within that bound, not idle poll intervals later.
func TestIdleSourceWakesWhenTheBrokerGoes(t *testing.T) {
	t.Parallel()
	ctx := tctx(t)
	nc, _, clock, src := externalSource(t, "quiet", time.Hour)
	sp := openSplit(t, src).(contract.IdleReader)
	buf := make([]contract.Element, 4)
	// Empty reads until the split waits for its doorbell.
	for range idlePollAfter + 1 {
		if _, err := sp.ReadIdle(ctx, buf); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := sp.ReadIdle(ctx, buf) // waits for the bell: an hour, or the connection's loss
		done <- err
	}()
	nc.StopServer(0)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the idle read that saw the connection go: %v, want nothing read and no error", err)
		}
	case <-time.After(2 * time.Minute): // a liveness bound: without the wake-up it waits an hour
		t.Fatal("an idle read still waits for its doorbell two minutes after the broker went away")
	}
	var last error
	for i := 0; i < 3 && last == nil; i++ {
		_, last = sp.ReadIdle(ctx, buf)
		clock.Advance(mtime.FromDuration(time.Minute))
	}
	if !errors.Is(last, ErrUnavailable) {
		t.Fatalf("reads a minute into the outage: %v, want ErrUnavailable", last)
	}
}

// externalSource starts a NATS server, connects a broker to it and
// returns a source on a new topic and subscription named sub, reading on
// a manual clock, with an UnreachableAfter of a minute and idlePoll as its
// IdlePollInterval (0: the default).
func externalSource(t *testing.T, sub string, idlePoll time.Duration) (*natscluster.Cluster, *Broker, *mtime.ManualClock, *Source) {
	t.Helper()
	nc := natscluster.Start(t, 1, 0)
	b, err := Connect(tctx(t), nc.URLs(), testLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Shutdown(context.Background()) })
	setupTopic(t, b, sub, sub, 0)
	clock := mtime.NewManualClock(mtime.FromTime(time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)))
	src, err := NewSource(b, SourceConfig{Step: "Read", Subscription: sub, Schema: orderSchema, TimestampField: "ts",
		Clock: clock, UnreachableAfter: time.Minute, IdlePollInterval: idlePoll})
	if err != nil {
		t.Fatal(err)
	}
	return nc, b, clock, src
}
