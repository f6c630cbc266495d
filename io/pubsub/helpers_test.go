package pubsub

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/weir-dev/weir/runner/contract"
)

func testLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestBroker starts an embedded broker in a temporary directory and
// stops it when the test ends.
func newTestBroker(t testing.TB) *Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := StartEmbedded(ctx, Options{StoreDir: t.TempDir(), Logger: testLogger()})
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return b
}

// externalBroker connects to the NATS server at 127.0.0.1:4222, or skips
// the test when none is reachable.
func externalBroker(t *testing.T) *Broker {
	t.Helper()
	c, err := net.DialTimeout("tcp", "127.0.0.1:4222", 300*time.Millisecond)
	if err != nil {
		t.Skip("no NATS server at 127.0.0.1:4222")
	}
	c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := Connect(ctx, "nats://127.0.0.1:4222", testLogger())
	if err != nil {
		t.Skipf("NATS at 127.0.0.1:4222 is not usable: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := b.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return b
}

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// readN reads from sp until it has n elements or the deadline passes.
func readN(t *testing.T, ctx context.Context, sp contract.SourceSplit, n int, bufSize int) []contract.Element {
	t.Helper()
	var out []contract.Element
	buf := make([]contract.Element, bufSize)
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		want := min(bufSize, n-len(out))
		res, err := sp.Read(ctx, buf[:want])
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		out = append(out, buf[:res.N]...)
	}
	if len(out) != n {
		t.Fatalf("read %d elements, want %d", len(out), n)
	}
	return out
}

// readIdle reads until a Read returns nothing, and returns what was read.
func readIdle(t *testing.T, ctx context.Context, sp contract.SourceSplit) ([]contract.Element, contract.ReadResult) {
	t.Helper()
	var out []contract.Element
	buf := make([]contract.Element, 64)
	for {
		res, err := sp.Read(ctx, buf)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if res.N == 0 {
			return out, res
		}
		out = append(out, buf[:res.N]...)
	}
}
