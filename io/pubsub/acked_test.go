package pubsub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func TestSeqRuns(t *testing.T) {
	tests := []struct {
		seqs []uint64
		want string
	}{
		{nil, "null"},
		{[]uint64{5}, "[[5,5]]"},
		{[]uint64{8, 3, 5, 1, 2, 2}, "[[1,3],[5,5],[8,8]]"},
		{[]uint64{4, 6, 5, 10}, "[[4,6],[10,10]]"},
	}
	for _, tc := range tests {
		runs := toRuns(tc.seqs)
		b, err := json.Marshal(runs)
		if err != nil || string(b) != tc.want {
			t.Errorf("toRuns(%v) = %s, %v; want %s", tc.seqs, b, err, tc.want)
			continue
		}
		var back []SeqRange
		if err := json.Unmarshal(b, &back); err != nil || !slices.Equal(back, runs) {
			t.Errorf("decoding %s: %v, %v", b, back, err)
		}
		for q := uint64(0); q <= 11; q++ {
			if got, want := inRuns(runs, q), slices.Contains(tc.seqs, q); got != want {
				t.Errorf("inRuns(%s, %d) = %v", b, q, got)
			}
		}
		if len(tc.seqs) > 0 {
			want := slices.Compact(slices.Sorted(slices.Values(tc.seqs)))
			if got := runSeqs(runs); !slices.Equal(got, want) {
				t.Errorf("runSeqs(%s) = %v", b, got)
			}
		}
	}
	var r SeqRange
	if err := json.Unmarshal([]byte("[5,4]"), &r); err == nil {
		t.Error("a run that ends before it starts was decoded")
	}
}

func TestAckIDSequence(t *testing.T) {
	tests := []struct {
		id   string
		seq  uint64
		isID bool
	}{
		{"$JS.ACK.T_t.s.1.42.7.1700000000.0", 42, true},
		{"$JS.ACK.dom.ACC.T_t.s.1.43.7.1700000000.0.x", 43, true},
		{"$JS.ACK.T_t.s.1.x.7.1700000000.0", 0, false},
		{"_INBOX.abc", 0, false},
	}
	for _, tc := range tests {
		if seq, ok := AckIDSequence(tc.id); seq != tc.seq || ok != tc.isID {
			t.Errorf("AckIDSequence(%q) = %d, %v", tc.id, seq, ok)
		}
	}
}

// perMessageSub creates topic t and a per-message subscription s of it,
// publishes n messages (data "1" to "n") and fetches them all, unacknowledged.
func perMessageSub(t *testing.T, ctx context.Context, b *Broker, n int) map[uint64]jetstream.Msg {
	t.Helper()
	mustTopic(t, ctx, b, "t")
	if _, err := b.CreateSubscription(ctx, "s", "t", SubscriptionConfig{PerMessageAck: true, AckWait: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		if _, err := b.Publish(ctx, "t", []byte(fmt.Sprint(i)), nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	_, c, err := b.SubscriptionConsumer(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]jetstream.Msg{}
	for len(got) < n {
		batch, err := c.Fetch(n-len(got), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			md, _ := m.Metadata()
			got[md.Sequence.Stream] = m
		}
	}
	return got
}

// ackOne acknowledges deliveries as the gRPC API does: the
// acknowledgement, then its record.
func ackOne(t *testing.T, ctx context.Context, b *Broker, ms map[uint64]jetstream.Msg, seqs ...uint64) {
	t.Helper()
	for _, q := range seqs {
		if err := ms[q].DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.RecordAcks(ctx, "s", []string{ms[q].Reply()}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSnapshotTooManyAckedRuns: a snapshot that would need more runs of
// out-of-order acknowledgements than it holds is refused, naming the
// problem, instead of holding fewer (which would deliver acknowledged
// messages again after a seek).
func TestSnapshotTooManyAckedRuns(t *testing.T) {
	ctx := context.Background()
	b := newTestBroker(t)
	b.acks.maxRuns = 2
	ms := perMessageSub(t, ctx, b, 8)
	ackOne(t, ctx, b, ms, 2, 4)
	if snap, err := b.CreateSubscriptionSnapshot(ctx, "two", "s"); err != nil || !slices.Equal(snap.Acked, []SeqRange{{First: 2, Last: 2}, {First: 4, Last: 4}}) {
		t.Fatalf("two runs: %+v, %v", snap, err)
	}
	ackOne(t, ctx, b, ms, 6)
	_, err := b.CreateSubscriptionSnapshot(ctx, "three", "s")
	if !errors.Is(err, ErrSnapshotTooLarge) {
		t.Fatalf("three runs over a maximum of two: %v", err)
	}
	t.Log(err)
	ackOne(t, ctx, b, ms, 1) // the floor moves to 2: runs {4}, {6}
	if snap, err := b.CreateSubscriptionSnapshot(ctx, "after", "s"); err != nil || !slices.Equal(snap.Acked, []SeqRange{{First: 4, Last: 4}, {First: 6, Last: 6}}) {
		t.Fatalf("after the floor moved: %+v, %v", snap, err)
	}
}

// TestFloorOnlySnapshotsStillSeek: a snapshot stored by an earlier
// version (no "acked") loads and seeks as before, and a cumulative
// subscription sought to a snapshot with runs gets those messages again
// (it cannot keep them acknowledged one by one).
func TestFloorOnlySnapshotsStillSeek(t *testing.T) {
	ctx := context.Background()
	b := newTestBroker(t)
	ms := perMessageSub(t, ctx, b, 6)
	ackOne(t, ctx, b, ms, 1, 2, 4)
	kv, err := b.snapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	old := fmt.Sprintf(`{"name":"old","topic":"t","subscription":"s","ack_floor":2,"create_time":%q,"expire_time":%q}`,
		now.Format(time.RFC3339Nano), now.Add(24*time.Hour).Format(time.RFC3339Nano))
	if _, err := kv.Create(ctx, "old", []byte(old)); err != nil {
		t.Fatal(err)
	}
	snap, err := b.SubscriptionSnapshot(ctx, "old")
	if err != nil || snap.AckFloor != 2 || len(snap.Acked) != 0 {
		t.Fatalf("old snapshot: %+v, %v", snap, err)
	}
	if _, err := b.Seek(ctx, "s", SeekTarget{Snapshot: "old"}); err != nil {
		t.Fatal(err)
	}
	if got := pullSeqs(t, ctx, b, "s", true); !equalSeqs(got, seqs(3, 6)) {
		t.Fatalf("after a seek to the old snapshot: %v, want 3 to 6", got)
	}

	// A snapshot with runs, sought to by a cumulative subscription.
	if _, err := b.Seek(ctx, "s", SeekTarget{Time: time.Unix(0, 1)}); err != nil {
		t.Fatal(err)
	}
	_, c, _ := b.SubscriptionConsumer(ctx, "s")
	batch, err := c.Fetch(6, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	again := map[uint64]jetstream.Msg{}
	for m := range batch.Messages() {
		md, _ := m.Metadata()
		again[md.Sequence.Stream] = m
	}
	ackOne(t, ctx, b, again, 1, 3, 5)
	if snap, err = b.CreateSubscriptionSnapshot(ctx, "runs", "s"); err != nil || !slices.Equal(snap.Acked, []SeqRange{{First: 3, Last: 3}, {First: 5, Last: 5}}) {
		t.Fatalf("snapshot: %+v, %v", snap, err)
	}
	if _, err := b.CreateSubscription(ctx, "w", "t", SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Seek(ctx, "w", SeekTarget{Snapshot: "runs"}); err != nil {
		t.Fatal(err)
	}
	if got := pullSeqs(t, ctx, b, "w", true); !equalSeqs(got, seqs(2, 6)) {
		t.Fatalf("the cumulative subscription after the seek: %v, want 2 to 6", got)
	}
	// The per-message one keeps them.
	if _, err := b.Seek(ctx, "s", SeekTarget{Snapshot: "runs"}); err != nil {
		t.Fatal(err)
	}
	if got := pullSeqs(t, ctx, b, "s", true); !equalSeqs(got, []uint64{2, 4, 6}) {
		t.Fatalf("the per-message subscription after the seek: %v, want 2, 4 and 6", got)
	}
}
