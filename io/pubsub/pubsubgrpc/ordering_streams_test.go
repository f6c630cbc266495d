package pubsubgrpc_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/pubsub/pubsubgrpc"
)

// childEnv names the subscription a child process of
// TestOrderingKeysAcrossStreamsAndProcesses receives from.
const childEnv = "WEIR_TEST_ORDERING_CHILD_SUB"

// orderingStreams is how many streaming pulls each receiving process
// opens (Google's Go client: NumGoroutines).
const orderingStreams = 4

// processing is one message's handling by a receiver: its key and index,
// and when the handler started and called Ack (the machine's wall clock,
// the same for every process).
type processing struct {
	key        string
	i          int
	start, ack int64
	proc       string
}

// receiveOrdered receives from subscription sub with orderingStreams
// streams until ctx is done, reporting each message's handling to rec.
func receiveOrdered(ctx context.Context, c *gpubsub.Client, sub string, rec func(processing)) error {
	s := c.Subscriber(sub)
	s.ReceiveSettings.NumGoroutines = orderingStreams
	s.ReceiveSettings.MaxOutstandingMessages = 20
	return s.Receive(ctx, func(_ context.Context, m *gpubsub.Message) {
		start := time.Now().UnixNano()
		key, is, _ := strings.Cut(string(m.Data), ":")
		i, _ := strconv.Atoi(is)
		end := time.Now().UnixNano()
		rec(processing{key: key, i: i, start: start, ack: end})
		m.Ack()
	})
}

// TestOrderingChildReceiver is the second receiving process of
// TestOrderingKeysAcrossStreamsAndProcesses (it runs only as that
// test's child): it receives until its stdin closes and prints a line per
// message handled.
func TestOrderingChildReceiver(t *testing.T) {
	sub := os.Getenv(childEnv)
	if sub == "" {
		t.Skip("the child process of TestOrderingKeysAcrossStreamsAndProcesses")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	c, err := gpubsub.NewClient(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	err = receiveOrdered(ctx, c, sub, func(p processing) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "REC %s %d %d %d\n", p.key, p.i, p.start, p.ack)
		out.Flush()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOrderingKeysAcrossStreamsAndProcesses: Google's Go client opens
// several streaming pulls per subscription, and two processes receive from
// one ordered subscription, four streams each. Pub/Sub's contract is
// per-key order across all of a subscriber's streams: a key's next message
// is delivered only after the previous one is acknowledged, whichever
// stream holds it. So, per key, the handlings of its messages, in both
// processes together, come in publish order and never overlap, and every
// message is handled.
func TestOrderingKeysAcrossStreamsAndProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a second process")
	}
	const keys, perKey = 10, 50
	f := start(t, pubsubgrpc.Options{})
	ctx := context.Background()
	f.topic(t, "t")
	f.subscription(t, "s", "t", true, 0)
	p := f.client.Publisher("t")
	p.EnableMessageOrdering = true
	var results []*gpubsub.PublishResult
	for i := range perKey {
		for k := range keys {
			results = append(results, p.Publish(ctx, &gpubsub.Message{Data: []byte(fmt.Sprintf("k%d:%d", k, i)), OrderingKey: fmt.Sprintf("k%d", k)}))
		}
	}
	for _, r := range results {
		if _, err := r.Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	p.Stop()

	var mu sync.Mutex
	var all []processing
	handled := map[string]bool{}
	record := func(p processing) {
		mu.Lock()
		defer mu.Unlock()
		all = append(all, p)
		handled[fmt.Sprintf("%s:%d", p.key, p.i)] = true
	}

	// The second process: this test binary again, as TestOrderingChildReceiver.
	child := exec.Command(os.Args[0], "-test.run", "^TestOrderingChildReceiver$", "-test.count=1")
	child.Env = append(os.Environ(), childEnv+"=s", "PUBSUB_EMULATOR_HOST="+f.addr)
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	childDone := make(chan struct{})
	var childOut []string
	go func() {
		defer close(childDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			var p processing
			if _, err := fmt.Sscanf(line, "REC %s %d %d %d", &p.key, &p.i, &p.start, &p.ack); err == nil {
				p.proc = "child"
				record(p)
				continue
			}
			childOut = append(childOut, line)
		}
	}()

	// This process receives too once the child has begun, so that both
	// take part.
	if !await.Until(60*time.Second, 10*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(all) > 0
	}) {
		stdin.Close()
		<-childDone
		_ = child.Wait()
		t.Fatalf("the child receiver handled nothing:\n%s", strings.Join(childOut, "\n"))
	}
	rctx, cancel := context.WithCancel(ctx)
	recvErr := make(chan error, 1)
	go func() {
		recvErr <- receiveOrdered(rctx, f.client, "s", func(p processing) {
			p.proc = "parent"
			record(p)
		})
	}()
	done := await.Until(60*time.Second, 10*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == keys*perKey
	})
	cancel()
	stdin.Close()
	if err := <-recvErr; err != nil {
		t.Errorf("Receive: %v", err)
	}
	<-childDone
	if err := child.Wait(); err != nil {
		t.Errorf("the child receiver: %v\n%s", err, strings.Join(childOut, "\n"))
	}
	mu.Lock()
	defer mu.Unlock()
	if !done {
		t.Fatalf("handled %d of %d messages", len(handled), keys*perKey)
	}
	byProc := map[string]int{}
	byKey := map[string][]processing{}
	for _, p := range all {
		byProc[p.proc]++
		byKey[p.key] = append(byKey[p.key], p)
	}
	t.Logf("handled by process: %v (%d handlings of %d messages)", byProc, len(all), keys*perKey)
	for key, ps := range byKey {
		sort.Slice(ps, func(a, b int) bool { return ps[a].start < ps[b].start })
		for j := 1; j < len(ps); j++ {
			prev, cur := ps[j-1], ps[j]
			if cur.i < prev.i {
				t.Errorf("key %s: message %d handled (by the %s) after message %d (by the %s)", key, cur.i, cur.proc, prev.i, prev.proc)
			}
			if cur.start < prev.ack {
				t.Errorf("key %s: message %d handled (by the %s) while message %d was not yet acknowledged (by the %s)", key, cur.i, cur.proc, prev.i, prev.proc)
			}
		}
	}
}
