package pubsub

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/await"
)

// mountTmpfs mounts a tmpfs of sizeMiB MiB on dir (created), unmounted when
// the test ends. It skips the test when the machine does not let it mount
// (not root, no mount(8)), unless WEIR_REQUIRE_TMPFS=1, which .ci/run sets
// when it runs as root: then it fails.
func mountTmpfs(t *testing.T, dir string, sizeMiB int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", sizeMiB), "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("cannot mount a tmpfs on %s: %v %s", dir, err, strings.TrimSpace(string(out)))
		if os.Getenv("WEIR_REQUIRE_TMPFS") == "1" {
			t.Fatal(msg + " (WEIR_REQUIRE_TMPFS=1)")
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
}

// fillDisk writes a filler file in dir until the file system has no room
// left, and returns its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, size := range []int{64 << 10, 512} {
		buf := make([]byte, size)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling the disk: %v", err)
				}
				break
			}
		}
	}
	return path
}

// TestBrokerRecoversAfterFullDisk: an embedded broker whose store lives on
// a real tmpfs is filled up by another file until its writes fail with "no
// space left on device" (JetStream then refuses every later write of the
// stream, and may switch itself off); publishes are then refused with
// ErrStorageFull. Once the filler is deleted, one storage check (what the
// broker runs every Options.RecoverInterval) brings it back without a
// restart: publishes succeed again, and the topic holds every message that
// was acknowledged, exactly once, plus those the publisher retried after
// the fault. Two ways: the check called by hand (one check suffices), and
// the broker's own periodic check.
func TestBrokerRecoversAfterFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs")
	}
	for _, tt := range []struct {
		name     string
		interval time.Duration // Options.RecoverInterval
		byHand   bool          // call CheckStorage once, else wait for the broker's own check
	}{
		{name: "one check", interval: time.Hour, byHand: true},
		{name: "periodic check", interval: 50 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) { testRecoverFullDisk(t, tt.interval, tt.byHand) })
	}
}

func testRecoverFullDisk(t *testing.T, interval time.Duration, byHand bool) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "disk")
	mountTmpfs(t, dir, 16)
	b, err := StartEmbedded(ctx, Options{StoreDir: filepath.Join(dir, "broker"), Logger: testLogger(),
		DiskCheckInterval: time.Hour, RecoverInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Shutdown(ctx) })
	if _, err := b.CreateTopic(ctx, "t", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 1<<10)
	acked := map[string]bool{}
	publish := func(i int) error {
		id := fmt.Sprintf("m%d", i)
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := b.Publish(pctx, "t", append([]byte(id+" "), payload...), nil, id)
		if err == nil {
			acked[id] = true
		}
		return err
	}
	// A subscription that read and acknowledged part of the topic before
	// the fault goes on from there after it.
	if _, err := b.CreateSubscription(ctx, "s", "t", SubscriptionConfig{}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for ; n < 200; n++ {
		if err := publish(n); err != nil {
			t.Fatalf("publish %d before the fault: %v", n, err)
		}
	}
	if msgs, err := b.Pull(ctx, "s", 100, true); err != nil || len(msgs) != 100 {
		t.Fatalf("pull before the fault: %d messages, %v", len(msgs), err)
	}
	filler := fillDisk(t, dir)
	failed := -1
	for ; n < 20000; n++ {
		if err := publish(n); err != nil {
			failed = n
			t.Logf("publish %d failed on the full disk: %v", n, err)
			break
		}
	}
	if failed < 0 {
		t.Fatal("no publish failed on the full disk")
	}
	if byHand {
		// While the disk is full: refused at once, and a check fails.
		if err := publish(failed); !errors.Is(err, ErrStorageFull) {
			t.Fatalf("publish on the full disk: %v, want ErrStorageFull", err)
		}
		if err := b.CheckStorage(ctx); !errors.Is(err, ErrStorageFull) {
			t.Fatalf("the storage check on the full disk: %v, want ErrStorageFull", err)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if byHand {
		if err := b.CheckStorage(ctx); err != nil {
			t.Fatalf("the storage check after the disk has room again: %v", err)
		}
	} else if !await.Until(30*time.Second, 10*time.Millisecond, func() bool { return !b.StorageFailing() }) {
		t.Fatal("the broker did not recover by itself after the disk had room again")
	}
	if got := b.StorageRecoveries(); got != 1 {
		t.Errorf("StorageRecoveries %d, want 1", got)
	}
	// The publisher retries what failed, then goes on.
	for i := failed; i < failed+200; i++ {
		if err := publish(i); err != nil {
			t.Fatalf("publish %d after the disk has room again: %v", i, err)
		}
	}
	ids := readAllIDs(t, b, "t")
	seen := map[string]int{}
	for _, id := range ids {
		seen[id]++
	}
	for id := range acked {
		if seen[id] != 1 {
			t.Errorf("acknowledged message %s is stored %d times, want once", id, seen[id])
		}
	}
	for id, c := range seen {
		if c > 1 {
			t.Errorf("message %s is stored %d times", id, c)
		}
	}
	var rest int
	for {
		msgs, err := b.Pull(ctx, "s", 500, true)
		if err != nil {
			t.Fatalf("pull after the recovery: %v", err)
		}
		if len(msgs) == 0 {
			break
		}
		rest += len(msgs)
	}
	if rest != len(ids)-100 {
		t.Errorf("the subscription read %d messages after the recovery, want the %d it had not acknowledged", rest, len(ids)-100)
	}
	t.Logf("%d acknowledged, %d stored; failed at %d", len(acked), len(ids), failed)
}

// readAllIDs reads every message of topic through a new subscription from
// the beginning and returns the ID prefix of each payload, in order.
func readAllIDs(t *testing.T, b *Broker, topic string) []string {
	t.Helper()
	ctx := context.Background()
	info, err := b.Topic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	sub := "readall-" + topic
	if _, err := b.CreateSubscription(ctx, sub, topic, SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for uint64(len(ids)) < info.Messages {
		msgs, err := b.Pull(ctx, sub, 500, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			id, _, _ := strings.Cut(string(m.Data), " ")
			ids = append(ids, id)
		}
	}
	return ids
}
