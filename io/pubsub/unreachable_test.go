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
	nc := natscluster.Start(t, 1, 0)
	ctx := tctx(t)
	b, err := Connect(ctx, nc.URLs(), testLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Shutdown(context.Background()) })
	setupTopic(t, b, "gone", "gone", 0)
	clock := mtime.NewManualClock(mtime.FromTime(time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)))
	src, err := NewSource(b, SourceConfig{Step: "Read", Subscription: "gone", Schema: orderSchema, TimestampField: "ts",
		Clock: clock, UnreachableAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
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
	err = read()
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, contract.ErrUnavailable) || !strings.Contains(err.Error(), "subscription gone") {
		t.Fatalf("a read a minute into the outage: %v, want ErrUnavailable naming the subscription", err)
	}
}
