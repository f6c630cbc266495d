package pubsub

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
)

// TestTrack: the event-time table keeps per one-minute bucket the smallest
// sequence read, answers the first sequence to re-read for an event time,
// and prunes buckets behind the watermark by the horizon and the cap,
// raising From so that a rewind it can no longer answer is known.
func TestTrack(t *testing.T) {
	min := func(m int) mtime.Time { return mtime.Time(int64(m) * 60_000) }
	tr := &Track{From: int64(mtime.MinTimestamp)}
	// seq: event minute (out of order on purpose).
	for seq, m := range []int{0, 0, 2, 1, 2, 5, 1, 3} {
		tr.note(min(m).Add(1500), uint64(seq+1))
	}
	pt := PositionTrack{Tracked: true, From: mtime.Time(tr.From), Buckets: tr.Buckets}
	tests := []struct {
		name  string
		t     mtime.Time
		want  uint64
		found bool
	}{
		{"from the first minute", min(0), 1, true},
		{"inside the first minute", min(0).Add(59_000), 1, true},
		{"from minute 1", min(1), 3, true}, // minute 2 was first read at seq 3
		{"from minute 3", min(3), 6, true},
		{"from minute 4", min(4), 6, true},
		{"after everything", min(6), 0, false},
	}
	for _, tc := range tests {
		got, ok := pt.FirstSequenceFor(tc.t)
		if got != tc.want || ok != tc.found {
			t.Errorf("%s: FirstSequenceFor = %d %v, want %d %v", tc.name, got, ok, tc.want, tc.found)
		}
	}
	if !pt.Covers(min(0)) || !pt.Covers(mtime.MinTimestamp+1) {
		t.Errorf("an unpruned table covers everything")
	}
	// Watermark at minute 4: with a 2-minute horizon the buckets ending at
	// or before minute 2 (minutes 0 and 1) go.
	tr.prune(min(4), 2*mtime.Minute)
	if tr.From != int64(min(2)) || len(tr.Buckets) != 3 || tr.Buckets[0].Start != int64(min(2)) {
		t.Fatalf("after pruning: from %d, buckets %+v", tr.From, tr.Buckets)
	}
	pt = PositionTrack{Tracked: true, From: mtime.Time(tr.From), Buckets: tr.Buckets}
	if pt.Covers(min(1)) || !pt.Covers(min(2)) {
		t.Errorf("after pruning: covers minute 1 %v, minute 2 %v", pt.Covers(min(1)), pt.Covers(min(2)))
	}
	if (PositionTrack{Tracked: false}).Covers(min(9)) {
		t.Error("an untracked position covers nothing")
	}
	// The cap keeps the newest MaxRewindBuckets.
	tr = &Track{From: int64(mtime.MinTimestamp)}
	for i := range MaxRewindBuckets + 10 {
		tr.note(min(i), uint64(i+1))
	}
	tr.prune(mtime.MinTimestamp, mtime.Hour)
	if len(tr.Buckets) != MaxRewindBuckets || tr.From != int64(min(10)) {
		t.Fatalf("capped: %d buckets, from %d", len(tr.Buckets), tr.From)
	}
	// Negative event times bucket down.
	if bucketOf(-1) != -60_000 {
		t.Errorf("bucketOf(-1) = %d", bucketOf(-1))
	}
}

// TestSourceRewind: a split configured to re-read (RewindStart) skips the
// messages of expired windows (counted, not emitted), holds its watermark
// at −∞ until it has read the old job's last message, then starts it at
// the old job's watermark; its positions carry the event-time table, which
// a Resume restores.
func TestSourceRewind(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	setupTopic(t, b, "rw", "rw", 0)
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10 {
		ts := base.Add(time.Duration(i) * 10 * time.Second).Format(time.RFC3339)
		if _, err := b.Publish(ctx, "rw", []byte(fmt.Sprintf(`{"region":"N","amount":%d,"ts":%q}`, i, ts)), nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	oldWM := mtime.FromTime(base.Add(80 * time.Second))
	src, err := NewSource(b, SourceConfig{Subscription: "rw", Schema: orderSchema, TimestampField: "ts",
		Watermark: WatermarkPolicy{IdleTimeout: -1},
		Rewind:    &contract.RewindStart{SkipBefore: mtime.FromTime(base.Add(30 * time.Second)), Watermark: oldWM, HoldUntil: 8}})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := src.CatchUp(); !ok || !c.Holding || c.HoldUntil != 8 {
		t.Fatalf("CatchUp before the first read: %+v %v, want holding until 8", c, ok)
	}
	sp := openSplit(t, src)
	cs, ok := sp.(contract.CatchingUpSplit)
	if !ok {
		t.Fatalf("the split %T is not a contract.CatchingUpSplit", sp)
	}
	buf := make([]contract.Element, 1)
	var got []int64
	for len(got) < 7 {
		res, err := sp.Read(ctx, buf)
		if err != nil {
			t.Fatal(err)
		}
		if res.N == 0 {
			continue
		}
		e := buf[0]
		got = append(got, e.Source.Offset)
		// The drain of a split still catching up reads on (CatchingUp), and
		// the service shows the progress (CatchUp).
		holding := e.Source.Offset < 8
		if c, _ := src.CatchUp(); c.ReadSeq != uint64(e.Source.Offset) || c.Holding != holding || cs.CatchingUp() != holding {
			t.Fatalf("after sequence %d: CatchUp %+v, CatchingUp %v; want read_seq %d, holding %v", e.Source.Offset, c, cs.CatchingUp(), e.Source.Offset, holding)
		}
		if e.Source.Offset < 8 && res.Watermark != mtime.MinTimestamp {
			t.Fatalf("after sequence %d (before the old job's last, 8) the watermark is %v, want -inf", e.Source.Offset, res.Watermark)
		}
		if e.Source.Offset >= 8 && res.Watermark < oldWM {
			t.Fatalf("after sequence %d the watermark is %v, want at least the old job's %v", e.Source.Offset, res.Watermark, oldWM)
		}
	}
	if fmt.Sprint(got) != "[4 5 6 7 8 9 10]" {
		t.Fatalf("read sequences %v, want 4..10 (1..3 are before the skip bound)", got)
	}
	if src.RewindSkipped() != 3 {
		t.Errorf("RewindSkipped = %d, want 3", src.RewindSkipped())
	}
	pos, err := sp.Position()
	if err != nil {
		t.Fatal(err)
	}
	var p position
	if err := json.Unmarshal(pos, &p); err != nil {
		t.Fatal(err)
	}
	// Sequences 4..10 at 30s..90s: minute 0 from 4, minute 1 from 7.
	if p.Track == nil || len(p.Track.Buckets) != 2 || p.Track.Buckets[0].MinSeq != 4 || p.Track.Buckets[1].MinSeq != 7 || p.Track.From != int64(mtime.MinTimestamp) {
		t.Fatalf("position track: %+v", p.Track)
	}
	pt, err := b.PositionTrack(ctx, pos)
	if err != nil || !pt.Tracked || pt.Topic != "rw" || pt.StreamSeq != 10 || pt.Watermark < oldWM {
		t.Fatalf("PositionTrack: %+v %v", pt, err)
	}
	first, retainedAt, err := b.Retained(ctx, "rw")
	if err != nil || first != 1 || retainedAt.IsZero() {
		t.Fatalf("Retained: %d %v %v", first, retainedAt, err)
	}
	// The first split ends first, as a job's splits end before a
	// replacement positions the subscription: a Read leaves its pull
	// request in flight for the next Read (up to FetchWait), and on a
	// loaded machine the server could still hold it when the seek makes
	// sequences 9 and 10 deliverable again. The abandoned split would then
	// receive one of them, out of the new split's reach until the ack wait
	// (60 s) redelivers it: 1 of 2 read within 10 s, as seen once.
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.SeekToSequence(ctx, "rw", 9); err != nil {
		t.Fatal(err)
	}
	sp2 := openSplit(t, src)
	var els []contract.Element
	buf = make([]contract.Element, 4)
	for deadline := time.Now().Add(10 * time.Second); len(els) < 2 && time.Now().Before(deadline); {
		res, err := sp2.Read(ctx, buf)
		if err != nil {
			t.Fatal(err)
		}
		els = append(els, buf[:res.N]...)
	}
	if len(els) != 2 || els[0].Source.Offset != 9 || els[1].Source.Offset != 10 {
		// Say where the subscription stood.
		var offs []int64
		for _, e := range els {
			offs = append(offs, e.Source.Offset)
		}
		state := "unknown"
		if _, c, err := b.findSubscription(ctx, "rw"); err == nil {
			if ci, err := c.Info(ctx); err == nil {
				state = fmt.Sprintf("delivered %d, ack floor %d, ack pending %d, redelivered %d, waiting pulls %d, pending %d",
					ci.Delivered.Stream, ci.AckFloor.Stream, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting, ci.NumPending)
			}
		}
		t.Fatalf("after SeekToSequence(9) read sequences %v, want [9 10]; the subscription: %s", offs, state)
	}
}

// TestSourceRewindFromSeq: a re-reading split opened without a position
// starts at RewindStart.FromSeq even when the subscription's
// acknowledgement floor has moved past it since the service positioned it
// (a late acknowledgement of the old job), instead of skipping the re-read.
func TestSourceRewindFromSeq(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	setupTopic(t, b, "rf", "rf", 0)
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10 {
		ts := base.Add(time.Duration(i) * time.Second).Format(time.RFC3339)
		if _, err := b.Publish(ctx, "rf", []byte(fmt.Sprintf(`{"region":"N","amount":%d,"ts":%q}`, i, ts)), nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	// Everything up to 10 counts as acknowledged.
	if err := b.SeekToSequence(ctx, "rf", 11); err != nil {
		t.Fatal(err)
	}
	src, err := NewSource(b, SourceConfig{Subscription: "rf", Schema: orderSchema, TimestampField: "ts",
		Watermark: WatermarkPolicy{IdleTimeout: -1},
		Rewind:    &contract.RewindStart{SkipBefore: mtime.MinTimestamp, Watermark: mtime.FromTime(base.Add(9 * time.Second)), HoldUntil: 10, FromSeq: 4}})
	if err != nil {
		t.Fatal(err)
	}
	sp := openSplit(t, src)
	buf := make([]contract.Element, 1)
	var got []int64
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < 7 && time.Now().Before(deadline) {
		res, err := sp.Read(ctx, buf)
		if err != nil {
			t.Fatal(err)
		}
		if res.N == 1 {
			got = append(got, buf[0].Source.Offset)
		}
	}
	if fmt.Sprint(got) != "[4 5 6 7 8 9 10]" {
		t.Fatalf("read sequences %v, want 4..10 (the re-read starts at FromSeq, not at the floor 10)", got)
	}
}

// TestSourceRewindExpired: when the topic drops the rest of what a
// re-reading split must read (retention, a size limit or a purge) while it
// holds, the split ends its hold instead of waiting forever for the old
// job's last message: it reports the lost sequences (OnCatchUpExpired,
// CatchUp.Expired), its watermark is no longer −∞, and its position is at
// HoldUntil, so a split resumed from it does not hold again.
func TestSourceRewindExpired(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	setupTopic(t, b, "rx", "rx", 0)
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range 8 {
		ts := base.Add(time.Duration(i) * time.Second).Format(time.RFC3339)
		if _, err := b.Publish(ctx, "rx", []byte(fmt.Sprintf(`{"region":"N","amount":%d,"ts":%q}`, i, ts)), nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	oldWM := mtime.FromTime(base.Add(7 * time.Second))
	src, err := NewSource(b, SourceConfig{Step: "Events", Subscription: "rx", Schema: orderSchema, TimestampField: "ts",
		Watermark: WatermarkPolicy{IdleTimeout: -1},
		Rewind:    &contract.RewindStart{SkipBefore: mtime.MinTimestamp, Watermark: oldWM, HoldUntil: 8, FromSeq: 1}})
	if err != nil {
		t.Fatal(err)
	}
	var got []contract.CatchUpExpired
	src.OnCatchUpExpired(func(e contract.CatchUpExpired) { got = append(got, e) })
	sp := openSplit(t, src)
	cs := sp.(contract.CatchingUpSplit)
	read := readN(t, ctx, sp, 3, 1)
	last := uint64(read[2].Source.Offset)
	st, err := b.js.Stream(ctx, "WEIR_TOPIC_rx")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSequence(9)); err != nil {
		t.Fatal(err)
	}
	buf := make([]contract.Element, 1)
	var res contract.ReadResult
	for cs.CatchingUp() {
		// A message the fetch in flight had delivered before the purge is
		// still read.
		if res, err = sp.Read(ctx, buf); err != nil {
			t.Fatal(err)
		}
		if res.N == 1 {
			last = uint64(buf[0].Source.Offset)
		}
	}
	if res.Watermark < oldWM {
		t.Errorf("watermark after the hold ended: %v, want at least the old job's %v", res.Watermark, oldWM)
	}
	want := contract.CatchUpExpired{Step: "Events", Subscription: "rx", Topic: "rx", FirstSeq: last + 1, LastSeq: 8, Messages: 8 - last, HoldUntil: 8, NextSeq: 9}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("reported %+v, want [%+v]", got, want)
	}
	if c, _ := src.CatchUp(); c.Holding || c.ReadSeq != 8 || c.Expired != 8-last {
		t.Errorf("CatchUp after the hold ended: %+v, want read_seq 8, %d expired, not holding", c, 8-last)
	}
	pos, err := sp.Position()
	if err != nil {
		t.Fatal(err)
	}
	sp.Close()
	sps, err := src.Resume(ctx, [][]byte{pos})
	if err != nil {
		t.Fatal(err)
	}
	defer sps[0].Close()
	if sps[0].(contract.CatchingUpSplit).CatchingUp() {
		t.Errorf("a split resumed from the position after the hold ended holds again")
	}
}
