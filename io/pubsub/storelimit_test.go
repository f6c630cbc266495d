package pubsub

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestStoreLimitFollowsDisk: an embedded broker whose limit follows the disk
// refuses publishes with ErrStorageFull once the disk (here, a free-space
// reading the test controls) is full, and accepts them again once the disk
// has room, without a restart: the limit was raised from the new reading.
func TestStoreLimitFollowsDisk(t *testing.T) {
	ctx := context.Background()
	var free atomic.Int64
	free.Store(256 << 10) // the broker may fill three quarters: 192 KiB
	b, err := StartEmbedded(ctx, Options{StoreDir: t.TempDir(), Logger: testLogger(),
		DiskCheckInterval: time.Hour, // refreshed by hand below
		diskFree:          func(string) (int64, error) { return free.Load(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Shutdown(ctx) })
	if _, err := b.CreateTopic(ctx, "t", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("x"), 4<<10)
	published, refused := 0, error(nil)
	for range 1000 {
		if _, err := b.Publish(ctx, "t", payload, nil, ""); err != nil {
			refused = err
			break
		}
		published++
	}
	if !errors.Is(refused, ErrStorageFull) {
		t.Fatalf("after %d messages of 4 KiB the broker answered %v, want ErrStorageFull", published, refused)
	}
	if published == 0 || published > 60 {
		t.Fatalf("%d messages of 4 KiB fitted in a 192 KiB limit", published)
	}
	// The disk has room again: the next refresh raises the limit.
	free.Store(64 << 20)
	limit, err := b.RefreshStoreLimit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if limit < 48<<20 {
		t.Fatalf("the limit after the disk grew is %d bytes, want at least 48 MiB", limit)
	}
	for i := range 100 {
		if _, err := b.Publish(ctx, "t", payload, nil, ""); err != nil {
			t.Fatalf("publish %d after the disk grew: %v", i, err)
		}
	}
	// A smaller reading never lowers the limit (JetStream cannot).
	free.Store(1 << 10)
	if again, err := b.RefreshStoreLimit(ctx); err != nil || again != limit {
		t.Fatalf("refresh on a fuller disk: %d %v, want the limit kept at %d", again, err, limit)
	}
}
