package pubsub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/mtime"
)

// newClockBroker is newTestBroker with a manual clock at the wall time.
func newClockBroker(t *testing.T) (*Broker, *mtime.ManualClock) {
	t.Helper()
	clock := mtime.NewManualClock(mtime.FromTime(time.Now()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := StartEmbedded(ctx, Options{StoreDir: t.TempDir(), Logger: testLogger(), Clock: clock})
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
	return b, clock
}

// pullSeqs pulls everything available from sub (acknowledging it when ack)
// and returns the stream sequences.
func pullSeqs(t *testing.T, ctx context.Context, b *Broker, sub string, ack bool) []uint64 {
	t.Helper()
	msgs, err := b.Pull(ctx, sub, 1000, ack)
	if err != nil {
		t.Fatalf("Pull: %v", err)
	}
	out := []uint64{}
	for _, m := range msgs {
		out = append(out, m.Sequence)
	}
	return out
}

// waitBacklog waits until subscription sub counts n messages not yet
// acknowledged. A pull answers with what the subscription holds at once,
// and a message the topic just stored reaches its subscriptions a moment
// later.
func waitBacklog(t *testing.T, ctx context.Context, b *Broker, sub string, n uint64) {
	t.Helper()
	var info SubscriptionInfo
	if !await.Until(10*time.Second, time.Millisecond, func() bool {
		var err error
		info, err = b.Subscription(ctx, sub)
		return err == nil && info.Backlog == n
	}) {
		t.Fatalf("subscription %s: backlog %d, want %d", sub, info.Backlog, n)
	}
}

func seqs(from, to uint64) []uint64 {
	out := []uint64{}
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func equalSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSnapshotAndSeek: a snapshot records the acknowledgement floor; a
// seek to it makes exactly the messages after it unacknowledged again,
// also after later acknowledgements; every step is checked.
func TestSnapshotAndSeek(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	mustTopic(t, ctx, b, "orders")
	if _, err := b.CreateSubscription(ctx, "orders-sub", "orders", SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	publishN(t, b, "orders", 1, 10, nil)
	waitBacklog(t, ctx, b, "orders-sub", 10)
	msgs, err := b.Pull(ctx, "orders-sub", 4, true)
	if err != nil || len(msgs) != 4 {
		t.Fatalf("Pull 4: %d messages, %v", len(msgs), err)
	}
	snap, err := b.CreateSubscriptionSnapshot(ctx, "before-rest", "orders-sub")
	if err != nil {
		t.Fatalf("CreateSubscriptionSnapshot: %v", err)
	}
	if snap.AckFloor != 4 || snap.Topic != "orders" || snap.Subscription != "orders-sub" {
		t.Fatalf("snapshot = %+v, want ack floor 4 of orders-sub on orders", snap)
	}
	if _, err := b.CreateSubscriptionSnapshot(ctx, "before-rest", "orders-sub"); !errors.Is(err, ErrSnapshotExists) {
		t.Fatalf("second snapshot of the name: %v, want ErrSnapshotExists", err)
	}
	steps := []struct {
		name string
		do   func() error
		want []uint64 // what a pull with ack then gets
	}{
		{"the rest, acknowledged", func() error { return nil }, seqs(5, 10)},
		{"nothing left", func() error { return nil }, []uint64{}},
		{"seek to the snapshot", func() error {
			res, err := b.Seek(ctx, "orders-sub", SeekTarget{Snapshot: "before-rest"})
			if err == nil && (res.AckFloor != 4 || res.Backlog != 6) {
				return fmt.Errorf("seek result %+v, want ack floor 4, backlog 6", res)
			}
			return err
		}, seqs(5, 10)},
		{"more messages after the seek", func() error {
			publishN(t, b, "orders", 11, 12, nil)
			waitBacklog(t, ctx, b, "orders-sub", 2)
			return nil
		}, seqs(11, 12)},
		{"seek to the snapshot again", func() error {
			_, err := b.Seek(ctx, "orders-sub", SeekTarget{Snapshot: "before-rest"})
			return err
		}, seqs(5, 12)},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := pullSeqs(t, ctx, b, "orders-sub", true); !equalSeqs(got, st.want) {
			t.Fatalf("%s: pulled %v, want %v", st.name, got, st.want)
		}
	}
	list, err := b.ListSubscriptionSnapshots(ctx, "orders")
	if err != nil || len(list) != 1 || list[0].Name != "before-rest" {
		t.Fatalf("ListSubscriptionSnapshots = %+v, %v", list, err)
	}
	if err := b.DeleteSubscriptionSnapshot(ctx, "before-rest"); err != nil {
		t.Fatalf("DeleteSubscriptionSnapshot: %v", err)
	}
	for _, err := range []error{
		b.DeleteSubscriptionSnapshot(ctx, "before-rest"),
		func() error { _, err := b.SubscriptionSnapshot(ctx, "before-rest"); return err }(),
		func() error { _, err := b.Seek(ctx, "orders-sub", SeekTarget{Snapshot: "before-rest"}); return err }(),
	} {
		if !errors.Is(err, ErrSnapshotNotFound) {
			t.Fatalf("after delete: %v, want ErrSnapshotNotFound", err)
		}
	}
}

// TestSeekToTime: messages published before the time count as
// acknowledged, those at or after it as unacknowledged.
func TestSeekToTime(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	mustTopic(t, ctx, b, "clicks")
	if _, err := b.CreateSubscription(ctx, "clicks-sub", "clicks", SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	publishN(t, b, "clicks", 1, 6, nil)
	msgs, err := b.Pull(ctx, "clicks-sub", 6, true)
	if err != nil || len(msgs) != 6 {
		t.Fatalf("Pull: %d, %v", len(msgs), err)
	}
	fourth := msgs[3].PublishTime
	cases := []struct {
		name string
		at   time.Time
		want []uint64
	}{
		{"at the fourth message's publish time", fourth, seqs(4, 6)},
		{"just after it", fourth.Add(time.Nanosecond), seqs(5, 6)},
		{"before everything retained", msgs[0].PublishTime.Add(-time.Hour), seqs(1, 6)},
		{"after everything", msgs[5].PublishTime.Add(time.Second), []uint64{}},
		{"far in the future (past int64 nanoseconds)", time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC), []uint64{}},
		{"the last message's time", msgs[5].PublishTime, seqs(6, 6)},
	}
	for _, c := range cases {
		res, err := b.Seek(ctx, "clicks-sub", SeekTarget{Time: c.at})
		if err != nil {
			t.Fatalf("%s: Seek: %v", c.name, err)
		}
		if res.Backlog != uint64(len(c.want)) {
			t.Errorf("%s: backlog %d, want %d", c.name, res.Backlog, len(c.want))
		}
		if got := pullSeqs(t, ctx, b, "clicks-sub", true); !equalSeqs(got, c.want) {
			t.Fatalf("%s: pulled %v, want %v", c.name, got, c.want)
		}
	}
	if _, err := b.Seek(ctx, "clicks-sub", SeekTarget{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("seek to nothing: %v, want ErrInvalidConfig", err)
	}
	if _, err := b.Seek(ctx, "no-such-sub", SeekTarget{Time: fourth}); !errors.Is(err, ErrSubscriptionNotFound) {
		t.Fatalf("seek of a missing subscription: %v, want ErrSubscriptionNotFound", err)
	}
}

// TestSeekTopicMismatch: a snapshot of one topic cannot be sought to by a
// subscription of another; any subscription of the same topic can.
func TestSeekTopicMismatch(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	mustTopic(t, ctx, b, "a")
	mustTopic(t, ctx, b, "b")
	for _, s := range [][2]string{{"a-1", "a"}, {"a-2", "a"}, {"b-1", "b"}} {
		if _, err := b.CreateSubscription(ctx, s[0], s[1], SubscriptionConfig{FromBeginning: true}); err != nil {
			t.Fatal(err)
		}
	}
	publishN(t, b, "a", 1, 3, nil)
	if _, err := b.CreateSubscriptionSnapshot(ctx, "a-start", "a-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Seek(ctx, "b-1", SeekTarget{Snapshot: "a-start"}); !errors.Is(err, ErrSnapshotTopicMismatch) {
		t.Fatalf("seek across topics: %v, want ErrSnapshotTopicMismatch", err)
	}
	pullSeqs(t, ctx, b, "a-2", true)
	if _, err := b.Seek(ctx, "a-2", SeekTarget{Snapshot: "a-start"}); err != nil {
		t.Fatalf("seek of another subscription of the topic: %v", err)
	}
	if got := pullSeqs(t, ctx, b, "a-2", false); !equalSeqs(got, seqs(1, 3)) {
		t.Fatalf("after seek: %v, want 1..3", got)
	}
	// Deleting the topic deletes its subscriptions' snapshots.
	if err := b.DeleteTopic(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SubscriptionSnapshot(ctx, "a-start"); !errors.Is(err, ErrSnapshotNotFound) {
		t.Fatalf("snapshot after its topic's deletion: %v, want ErrSnapshotNotFound", err)
	}
}

// TestSnapshotLifetime: 7 days less the age of the oldest unacknowledged
// message, bounded by retention; under an hour refused; expired ones go.
func TestSnapshotLifetime(t *testing.T) {
	b, clock := newClockBroker(t)
	ctx := tctx(t)
	mustTopic(t, ctx, b, "week")
	if _, err := b.CreateTopic(ctx, "short", TopicConfig{Retention: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, s := range [][2]string{{"week-sub", "week"}, {"short-sub", "short"}} {
		if _, err := b.CreateSubscription(ctx, s[0], s[1], SubscriptionConfig{FromBeginning: true}); err != nil {
			t.Fatal(err)
		}
	}
	publishN(t, b, "week", 1, 2, nil)
	publishN(t, b, "short", 1, 2, nil)
	msgs, err := b.Pull(ctx, "week-sub", 1, false)
	if err != nil || len(msgs) != 1 {
		t.Fatal(err)
	}
	published := msgs[0].PublishTime
	// The short topic's message was published a moment later (tens of
	// milliseconds on a loaded machine): its expiry counts from its own time.
	shortMsgs, err := b.Pull(ctx, "short-sub", 1, false)
	if err != nil || len(shortMsgs) != 1 {
		t.Fatal(err)
	}
	shortPublished := shortMsgs[0].PublishTime
	clock.Set(mtime.FromTime(published.Add(24 * time.Hour)))
	week, err := b.CreateSubscriptionSnapshot(ctx, "week-snap", "week-sub")
	if err != nil {
		t.Fatal(err)
	}
	// 7d less the oldest unacknowledged message's age (1 day, to the
	// millisecond of the clock).
	if got, want := week.ExpireTime, published.Add(7*24*time.Hour); got.Sub(want).Abs() > time.Millisecond {
		t.Errorf("week snapshot expires %s, want %s", got, want)
	}
	if _, err := b.CreateSubscriptionSnapshot(ctx, "short-snap", "short-sub"); !errors.Is(err, ErrSnapshotExpiresTooSoon) {
		t.Fatalf("a snapshot of a 2h topic whose oldest message is a day old: %v, want ErrSnapshotExpiresTooSoon", err)
	}
	clock.Set(mtime.FromTime(published.Add(30 * time.Minute)))
	short, err := b.CreateSubscriptionSnapshot(ctx, "short-snap", "short-sub")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := short.ExpireTime, shortPublished.Add(2*time.Hour); got.Sub(want).Abs() > time.Millisecond {
		t.Errorf("short snapshot expires %s, want %s (the oldest message's expiry)", got, want)
	}
	clock.Set(mtime.FromTime(published.Add(3 * time.Hour)))
	if err := b.ExpireSubscriptionSnapshots(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := b.ListSubscriptionSnapshots(ctx, "")
	if err != nil || len(list) != 1 || list[0].Name != "week-snap" {
		t.Fatalf("after 3h: %+v, %v; want week-snap only", list, err)
	}
	clock.Set(mtime.FromTime(week.ExpireTime.Add(time.Millisecond)))
	if _, err := b.SubscriptionSnapshot(ctx, "week-snap"); !errors.Is(err, ErrSnapshotNotFound) {
		t.Fatalf("at its expire time: %v, want ErrSnapshotNotFound", err)
	}
	if _, err := b.CreateSubscriptionSnapshot(ctx, "week-snap", "no-such"); !errors.Is(err, ErrSubscriptionNotFound) {
		t.Fatalf("snapshot of a missing subscription: %v", err)
	}
}

// TestSnapshotSourcePosition: a snapshot at a checkpoint's position counts
// exactly what the checkpoint read as acknowledged.
func TestSnapshotSourcePosition(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	mustTopic(t, ctx, b, "src")
	if _, err := b.CreateSubscription(ctx, "src-sub", "src", SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	publishN(t, b, "src", 1, 5, nil)
	pos, _ := json.Marshal(position{V: positionVersion, Subscription: "src-sub", StreamSeq: 3})
	if sub, err := b.PositionSubscription(pos); err != nil || sub != "src-sub" {
		t.Fatalf("PositionSubscription = %q, %v", sub, err)
	}
	name := "0a1b2c3d-0000-4000-8000-000000000000--src-sub"
	sub, topic, _, err := b.SnapshotSourcePosition(ctx, name, pos)
	if err != nil || sub != "src-sub" || topic != "src" {
		t.Fatalf("SnapshotSourcePosition = %q %q %v", sub, topic, err)
	}
	pullSeqs(t, ctx, b, "src-sub", true)
	if _, err := b.Seek(ctx, "src-sub", SeekTarget{Snapshot: name}); err != nil {
		t.Fatal(err)
	}
	if got := pullSeqs(t, ctx, b, "src-sub", true); !equalSeqs(got, seqs(4, 5)) {
		t.Fatalf("after seek to the position's snapshot: %v, want 4..5", got)
	}
	if _, err := b.PositionSubscription([]byte("not json")); !errors.Is(err, ErrInvalidPosition) {
		t.Fatalf("bad position: %v", err)
	}
}

func mustTopic(t *testing.T, ctx context.Context, b *Broker, name string) {
	t.Helper()
	if _, err := b.CreateTopic(ctx, name, TopicConfig{}); err != nil {
		t.Fatalf("CreateTopic %s: %v", name, err)
	}
}

// TestPullRightAfterPublish: a pull right after a publish gets what was
// published, although a subscription sees messages just stored (or, just
// created or sought, the messages it now starts at) a moment later.
func TestPullRightAfterPublish(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	for i := range 40 {
		topic, sub := fmt.Sprintf("quick%d", i), fmt.Sprintf("quick%d-sub", i)
		mustTopic(t, ctx, b, topic)
		if _, err := b.CreateSubscription(ctx, sub, topic, SubscriptionConfig{FromBeginning: true}); err != nil {
			t.Fatal(err)
		}
		publishN(t, b, topic, 1, 5, nil)
		if got := pullSeqs(t, ctx, b, sub, true); !equalSeqs(got, seqs(1, 5)) {
			t.Fatalf("round %d: a pull right after publishing 5 messages got %v", i, got)
		}
		if _, err := b.Seek(ctx, sub, SeekTarget{Time: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
		if got := pullSeqs(t, ctx, b, sub, true); !equalSeqs(got, seqs(1, 5)) {
			t.Fatalf("round %d: a pull right after a seek to the beginning got %v", i, got)
		}
	}
}
