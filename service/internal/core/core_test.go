package core

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/service/record"
)

// wallClock is the wall clock as an mtime.Clock.
type wallClock struct{}

func (wallClock) Now() mtime.Time { return mtime.FromTime(time.Now()) }

// openCore opens a core on dataDir with no flows registered and starts it.
func openCore(t *testing.T, dataDir string) *Core {
	t.Helper()
	c, err := Open(context.Background(), Options{DataDir: dataDir, CheckpointInterval: 50 * time.Millisecond,
		Clock: wallClock{}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}, Hooks{})
	if err != nil {
		t.Fatalf("opening the core: %v", err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("starting the core: %v", err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	<-c.Recovered()
	return c
}

func seqs(evs []record.Event) []uint64 {
	var out []uint64
	for _, ev := range evs {
		out = append(out, ev.Seq)
	}
	return out
}
