// This file holds the split of the ReadFromPubSub source and its read path:
// the Read loop over the pull request in flight, handle (redelivery and
// dedupe drops, event time, future-skew rejects, the watermark), the JSON
// decode and the raw-format row.

package pubsub

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// split reads one subscription. Read, Position and Close are called from
// one goroutine; Ack from any (it touches only acked and the connection).
type split struct {
	src    *Source
	b      *Broker
	cfg    *SourceConfig
	cons   jetstream.Consumer
	stream string
	// srcName is the Source of the elements' positions: the topic. Its
	// stream sequences number the topic's messages for every subscription
	// alike, so a message read through two subscriptions (a replacement
	// job's own and its predecessor's) has one identity (sinks' element
	// IDs agree across the jobs).
	srcName string
	tsField int
	idField int
	// maxEvent is the source's (Source.maxEvent).
	maxEvent *atomic.Int64

	// batch is the pull request in flight, kept across Reads so that no
	// delivered message is dropped when Read returns early.
	batch    jetstream.MessageBatch
	batchN   int  // messages the in-flight batch delivered so far
	caughtUp bool // the last completed fetch delivered nothing
	pos      position
	wm       *watermarker
	seen     *seenIDs
	skipped  int64 // redeliveries and duplicates dropped
	horizon  mtime.Duration
	// rewindSkipped counts the messages skipped by SourceConfig.Rewind.
	rewindSkipped int64
	// floored: the watermark was raised to SourceConfig.Rewind.Watermark.
	floored bool
	// emptyHeld counts the fetches in a row that delivered nothing while
	// the split held (checkRetained).
	emptyHeld int
	// empty counts the reads in a row that found nothing (ReadIdle);
	// idleTimer times an idle read's wait; bellSub, while the split is
	// idle, rings bell at every message published to the topic
	// (bellFailed: it could not subscribe, and polls).
	empty     int
	idleTimer *time.Timer
	// downTimer times a read's wait for its fetch while the connection is
	// down (downWait).
	downTimer *time.Timer
	// pending is how many messages the subscription held after the last
	// one read (its metadata's NumPending); -1 before any (drained).
	pending    int64
	bell       chan struct{}
	bellSub    *nats.Subscription
	bellFailed bool

	acked atomic.Uint64 // highest stream sequence acknowledged
	// lastDelivery is the consumer sequence of the last message the split
	// handled (0: none since the split opened or rewound), to tell a
	// delivery lost on its way (lostDelivery) from a hole in the topic.
	lastDelivery uint64
	// lostDeliveries counts the rewinds after a lost delivery.
	lostDeliveries int64
	// downSince is when a read that found nothing first found the
	// broker's connection down (0: it was up at the last such read).
	downSince mtime.Time
}

// errLostDelivery is handle's report of a message delivered to the split's
// subscription that never reached the split (see lostDelivery).
var errLostDelivery = errors.New("a delivery was lost on its way")

// fetchBatch is how many bundles one pull request asks for: the batch
// continues across Reads, so fewer round trips to the broker stall the
// worker.
const fetchBatch = 4

// Read fills buf with up to len(buf) elements. It returns what is available
// as soon as there is something, and blocks at most about FetchWait when
// there is nothing; it returns ctx's error when ctx is done before any
// element arrived. A fetch still in flight when Read returns is continued by
// the next Read, so no delivered message is lost.
func (s *split) Read(ctx context.Context, buf []contract.Element) (contract.ReadResult, error) {
	return s.read(ctx, buf, fetchBatch*len(buf))
}

// ReadIdle is Read for a worker with nothing else to do
// (contract.IdleReader). Once the subscription has been empty for a while
// (idlePollAfter reads in a row) the split stops asking: it listens to the
// topic's subject (a plain NATS subscription, the doorbell) and fetches
// when a message is published there, or after IdlePollInterval at the
// latest (a redelivery or a seek rings no bell), or when ctx is cut short
// by the worker (it has work). No pull request is in flight meanwhile, so
// a pause (an update's, a rescale's, a drain's) never waits for one. An
// idle subscription then costs no request at all between publishes; the
// doorbell is hung up as soon as messages flow again.
func (s *split) ReadIdle(ctx context.Context, buf []contract.Element) (contract.ReadResult, error) {
	if s.batch == nil && s.empty >= idlePollAfter && s.drained(ctx) {
		if s.bellSub == nil {
			// First idle read: hang the doorbell, then fetch once more so
			// that a message published before it is not missed.
			s.hangBell()
		} else if err := s.waitBell(ctx); err != nil {
			return s.result(0), err
		}
	}
	// A small pull: an idle subscription's first messages come back as
	// soon, and its pull requests allocate little.
	res, err := s.read(ctx, buf, min(len(buf), idleFetchBatch))
	if res.N > 0 {
		s.hangUpBell()
	}
	return res, err
}

// drained reports whether the subscription has nothing left to deliver:
// the last message read said none was pending after it (or, before any
// message, the subscription says so). Fetches can come back empty while
// messages wait — a loaded machine, the cap of messages in flight — and
// the doorbell rings only for new publishes, so an idle wait starts only
// once the backlog is read.
func (s *split) drained(ctx context.Context) bool {
	if s.pending < 0 {
		ci, err := s.cons.Info(ctx)
		if err != nil {
			return false
		}
		s.pending = int64(ci.NumPending)
	}
	return s.pending == 0
}

// hangBell subscribes to the topic's subject: every message published
// there rings the split's bell. Without it (the subscription failed) the
// split polls every idleNoBellPoll.
func (s *split) hangBell() {
	if s.bell == nil {
		s.bell = make(chan struct{}, 1)
	}
	_, subject, err := topicNames(s.srcName)
	if err == nil {
		bell := s.bell
		s.bellSub, err = s.b.nc.Subscribe(subject, func(*nats.Msg) {
			select {
			case bell <- struct{}{}:
			default:
			}
		})
	}
	if err != nil {
		s.b.log.Debug("idle source: no doorbell on the topic, polling instead", "topic", s.srcName, "error", err)
		s.bellSub = nil
		s.bellFailed = true
	}
}

// hangUpBell ends the doorbell subscription, if any.
func (s *split) hangUpBell() {
	if s.bellSub != nil {
		_ = s.bellSub.Unsubscribe()
		s.bellSub = nil
	}
}

// waitBell waits for the bell, IdlePollInterval (idleNoBellPoll without a
// bell, or while the connection is down) or ctx, whichever comes first; a
// wait that began while connected ends when the connection goes down, so
// that the reads that follow report a lost broker within
// UnreachableAfter, not idle poll intervals later.
func (s *split) waitBell(ctx context.Context) error {
	d := s.cfg.IdlePollInterval
	if s.bellFailed {
		d = min(d, idleNoBellPoll)
	}
	down, poll := s.downWait()
	if s.idleTimer == nil {
		s.idleTimer = time.NewTimer(d)
	} else {
		s.idleTimer.Reset(d)
	}
	defer s.idleTimer.Stop() // Go 1.23 timers: no stale tick after Stop
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.bell:
	case <-s.idleTimer.C:
	case <-down:
	case <-poll:
	}
	return nil
}

// idleNoBellPoll is how often an idle split without a doorbell looks at
// its subscription.
const idleNoBellPoll = 500 * time.Millisecond

// idlePollAfter is how many empty reads in a row (a fifth of a second at
// the default FetchWait) make a read idle.
const idlePollAfter = 8

// idleFetchBatch is how many messages an idle read's pull asks for.
const idleFetchBatch = 64

func (s *split) read(ctx context.Context, buf []contract.Element, batch int) (contract.ReadResult, error) {
	res, err := s.readFetch(ctx, buf, batch)
	if res.N > 0 {
		s.empty = 0
	} else if err == nil {
		s.empty++
		err = s.checkConnected()
	}
	return res, err
}

// checkConnected fails a read that found nothing once the broker's
// connection has been down for UnreachableAfter. The client reconnects
// for ever and a pull request sent meanwhile waits in its buffer, so a
// read finds nothing rather than an error: without this a job whose
// external NATS server went away would idle, RUNNING, with nothing to say
// why. Its execution ends instead with ErrUnavailable, which a server job
// waits out (CONNECTOR_UNAVAILABLE, retried from its last checkpoint).
func (s *split) checkConnected() error {
	if s.b.nc.IsConnected() {
		s.downSince = 0
		return nil
	}
	now := s.cfg.Clock.Now()
	if s.downSince == 0 {
		s.downSince = now
		return nil
	}
	if down := now - s.downSince; down >= mtime.Time(mtime.FromDuration(s.cfg.UnreachableAfter)) {
		return fmt.Errorf("ReadFromPubSub %s: reading subscription %s: %w: the connection to the NATS server has been down for %s (%s)",
			s.cfg.Step, s.cfg.Subscription, ErrUnavailable, mtime.Duration(down), s.b.nc.Status())
	}
	return nil
}

func (s *split) readFetch(ctx context.Context, buf []contract.Element, batch int) (contract.ReadResult, error) {
	n := 0
	fetched := false
	for n < len(buf) {
		if s.batch == nil {
			if n > 0 || fetched {
				break
			}
			b, err := s.cons.Fetch(batch, jetstream.FetchMaxWait(s.cfg.FetchWait))
			if err != nil {
				return s.result(n), s.readError(err)
			}
			s.batch, s.batchN, fetched = b, 0, true
		}
		var m jetstream.Msg
		var ok bool
		if n == 0 {
			// A fetch in flight when the connection goes down may not end
			// for tens of seconds: the read returns empty instead (the
			// fetch stays for the next read), so that the worker reaches
			// its barriers and checkConnected counts the outage.
			down, poll := s.downWait()
			select {
			case m, ok = <-s.batch.Messages():
			case <-ctx.Done():
				return s.result(0), ctx.Err()
			case <-down:
				return s.result(0), nil
			case <-poll:
				return s.result(0), nil
			}
		} else {
			select {
			case m, ok = <-s.batch.Messages():
			default:
				return s.result(n), nil
			}
		}
		if !ok {
			err := s.batch.Error()
			s.caughtUp = s.batchN == 0
			s.batch = nil
			if err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
				return s.result(n), s.readError(err)
			}
			if s.caughtUp && s.holding() {
				s.checkRetained(ctx)
			}
			continue
		}
		s.batchN++
		emitted, err := s.handle(m, &buf[n])
		if errors.Is(err, errLostDelivery) {
			if err := s.recoverLostDelivery(ctx); err != nil {
				return s.result(n), err
			}
			continue
		}
		if err != nil {
			return s.result(n), err
		}
		if emitted {
			n++
		}
	}
	return s.result(n), nil
}

// downWait returns what ends a read's wait (for its fetch, or an idle
// read's for its doorbell) besides what it waits for: while connected, the connection's loss (Broker.connDown);
// while the connection is down, idleNoBellPoll (a read waits no longer, so
// that an outage is counted on time; never a closed channel, which would
// make the worker spin).
func (s *split) downWait() (down <-chan struct{}, poll <-chan time.Time) {
	if s.b.nc.IsConnected() {
		return s.b.connDown(), nil
	}
	if s.downTimer == nil {
		s.downTimer = time.NewTimer(idleNoBellPoll)
	} else {
		s.downTimer.Reset(idleNoBellPoll)
	}
	return nil, s.downTimer.C
}

func (s *split) result(n int) contract.ReadResult {
	if s.holding() {
		return contract.ReadResult{N: n, Watermark: mtime.MinTimestamp}
	}
	if s.cfg.Rewind != nil && !s.floored {
		s.wm.wm, s.floored = mtime.Max(s.wm.wm, s.cfg.Rewind.Watermark), true
	}
	wm := s.wm.current(s.cfg.Clock.Now(), s.caughtUp && n == 0)
	return contract.ReadResult{N: n, Watermark: wm}
}

// holding reports whether a re-reading split has not yet handled the old
// job's last message (RewindStart.HoldUntil).
func (s *split) holding() bool {
	return s.cfg.Rewind != nil && s.pos.StreamSeq < s.cfg.Rewind.HoldUntil
}

// CatchingUp implements contract.CatchingUpSplit: a drain of a re-reading
// split that still holds reads on up to the old job's last message first,
// so that the drain's panes are no smaller than the old job's (the old job
// had read every one of those messages). It becomes false by reading
// alone, also when the topic no longer holds those messages
// (checkRetained).
func (s *split) CatchingUp() bool { return s.holding() }

// retainedCheckEvery is how often a holding split whose fetches deliver
// nothing asks the broker whether what it still has to re-read is
// retained: on the first empty fetch, then every this many in a row
// (about a second at the default FetchWait; an idle holding split would
// otherwise double its requests to the broker).
const retainedCheckEvery = 40

// checkRetained ends the hold of a split whose fetches deliver nothing
// when the topic retains no message it still has to re-read: none of
// sequences (position, HoldUntil] is stored any more (the stream's first
// sequence is past HoldUntil: retention, a size limit or a purge dropped
// them) or the stream's last sequence is at or below the position (it can
// never reach HoldUntil). Without this the hold, and a drain that waits
// for it, would never end. The messages are counted and reported
// (CatchUpExpired); the position moves to HoldUntil, so that a restart
// from it does not hold again. A failed look-up is retried at the next
// check.
func (s *split) checkRetained(ctx context.Context) {
	s.emptyHeld++
	if (s.emptyHeld-1)%retainedCheckEvery != 0 {
		return
	}
	st, err := s.b.js.Stream(ctx, s.stream)
	if err != nil {
		s.b.log.Debug("re-read: reading the topic's retention", "subscription", s.cfg.Subscription, "topic", s.srcName, "error", err)
		return
	}
	si := st.CachedInfo().State
	hold := s.cfg.Rewind.HoldUntil
	if si.Msgs > 0 && si.FirstSeq <= hold && si.LastSeq > s.pos.StreamSeq {
		return // still there: the fetches come back empty for another reason (the subscription's cap of messages in flight)
	}
	next := si.FirstSeq
	if si.Msgs == 0 {
		next = si.LastSeq + 1
	}
	s.expire(s.pos.StreamSeq+1, hold, next)
	s.pos.StreamSeq = hold
	s.src.readSeq.Store(hold)
}

// expire counts and reports that the re-read's messages of sequences
// first to last are gone from the topic; next is where the re-read goes on.
func (s *split) expire(first, last, next uint64) {
	e := contract.CatchUpExpired{Step: s.cfg.Step, Subscription: s.cfg.Subscription, Topic: s.srcName,
		FirstSeq: first, LastSeq: last, Messages: last - first + 1, HoldUntil: s.cfg.Rewind.HoldUntil, NextSeq: next}
	s.src.expired.Add(e.Messages)
	if fn := s.src.onExpired.Load(); fn != nil && *fn != nil {
		(*fn)(e)
		return
	}
	s.b.log.Warn("re-read: messages the old job had read are no longer in the topic's retention; the catch-up goes on without them",
		"subscription", e.Subscription, "topic", e.Topic, "expired_messages", e.Messages, "first_seq", e.FirstSeq, "last_seq", e.LastSeq,
		"hold_until_seq", e.HoldUntil, "next_seq", e.NextSeq)
}

// readError is the error of a failed fetch from the split's subscription:
// a subscription deleted under the job says so (ErrSubscriptionNotFound).
func (s *split) readError(err error) error {
	what := "reading subscription " + s.cfg.Subscription
	if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("%s: %w: it was deleted while the job read it (%w)", what, ErrSubscriptionNotFound, err)
	}
	if errors.Is(err, nats.ErrNoResponders) {
		// A pull to a consumer deleted while no pull was in flight (an
		// idle split) finds nobody to answer it: say what happened.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, cerr := s.b.js.Consumer(ctx, s.stream, NATSName(s.cfg.Subscription)); errors.Is(cerr, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("%s: %w: it was deleted while the job read it (%w)", what, ErrSubscriptionNotFound, cerr)
		}
	}
	return apiErr(what, err)
}

// duplicate reports whether the message seq, published at publish with
// data and ID id, repeats an ID seen within the dedupe window: it is then
// dropped, and counted as an ID conflict when its data differs from the
// first message's (Source.DuplicateIDConflicts; the first ten and every
// thousandth logged).
func (s *split) duplicate(id string, publish mtime.Time, data []byte, seq uint64) bool {
	dup, conflict := s.seen.check(id, publish, s.seen.hash(data))
	if !dup {
		return false
	}
	s.skipped++
	if conflict {
		if n := s.src.idConflicts.Add(1); logged(n) {
			s.b.log.Warn("a message reused an ID with other data: the source's dedupe window dropped it",
				"subscription", s.cfg.Subscription, "message_id", truncateID(id), "sequence", seq, "id_conflicts", n)
		}
	}
	return true
}

// rowID is the ID a decoded row carries in its id_field, as the dedupe
// compares IDs (the field's text); "" when the source has no id_field,
// r is nil or the field is null.
func (s *split) rowID(r *row.Row) string {
	if s.idField < 0 || r == nil {
		return ""
	}
	v := r.Values[s.idField]
	if v == nil {
		return ""
	}
	return string(row.AppendText(nil, v))
}

// lostDelivery reports whether the message of stream sequence seq,
// delivered as consumer sequence dseq, follows a delivery that never
// reached the split: the consumer delivered something in between (its
// delivery sequence skipped) and the topic's sequence skipped too. A pull
// request that expired on the client while the broker still sent it
// messages (a loaded machine) leaves them delivered and unacknowledged;
// the broker sends them again only after AckWait, when this split would
// drop them as redeliveries of what it emitted (their sequence is below
// its position) and a later cumulative acknowledgement would acknowledge
// them unread. A hole in the topic (messages it dropped) skips the
// topic's sequence only; a redelivery of something the split emitted has
// a sequence below its position.
func (s *split) lostDelivery(seq, dseq uint64) bool {
	return s.lastDelivery > 0 && dseq > s.lastDelivery+1 && s.pos.StreamSeq > 0 && seq > s.pos.StreamSeq+1 && !s.holding()
}

// recoverLostDelivery rewinds the subscription to its acknowledgement
// floor after a lost delivery: the broker delivers everything
// unacknowledged again, in order; the split drops what it already emitted
// (below its position) and reads the lost messages in their place. The
// pull request in flight is let end first (what it still brings is
// delivered again too). Nothing is acknowledged by the rewind.
func (s *split) recoverLostDelivery(ctx context.Context) error {
	if s.batch != nil {
		// The pull request in flight would take the deliveries the
		// rewind makes: let it end (at most FetchWait), dropping what it
		// still brings (the rewind delivers it again).
		for range s.batch.Messages() {
		}
		s.batch = nil
	}
	s.lastDelivery = 0
	s.lostDeliveries++
	// From the sequence after the last one this split acknowledged (the
	// acknowledgement floor, unless an acknowledgement is on its way):
	// nothing unacknowledged is treated as acknowledged.
	floor := s.acked.Load()
	if ci, err := s.cons.Info(ctx); err == nil {
		floor = max(floor, ci.AckFloor.Stream)
	}
	cons, err := s.b.rewindConsumer(ctx, s.stream, s.cfg.Subscription, floor+1, s.cons, true)
	if err != nil {
		return fmt.Errorf("reading subscription %s: rewinding it after a lost delivery: %w", s.cfg.Subscription, err)
	}
	s.b.log.Warn("a delivery of the subscription was lost on its way; it is read again from its acknowledgement floor",
		"subscription", s.cfg.Subscription, "after_seq", s.pos.StreamSeq)
	if cons != s.cons {
		s.cons = cons
		if l := s.src.live.Load(); l != nil {
			s.src.live.Store(&liveConsumer{topic: l.topic, cons: cons})
		}
	}
	return nil
}

// handle turns one message into an element (or a reject); it returns false
// for a message dropped as a redelivery or a duplicate.
func (s *split) handle(m jetstream.Msg, dst *contract.Element) (bool, error) {
	md, err := m.Metadata()
	if err != nil {
		return false, fmt.Errorf("reading subscription %s: %w", s.cfg.Subscription, err)
	}
	s.pending = int64(md.NumPending)
	s.caughtUp = false
	s.emptyHeld = 0
	now := s.cfg.Clock.Now()
	s.wm.busy(now)
	seq := md.Sequence.Stream
	if s.lostDelivery(seq, md.Sequence.Consumer) {
		return false, errLostDelivery
	}
	s.lastDelivery = md.Sequence.Consumer
	if seq <= s.pos.StreamSeq {
		// Delivered again after AckWait while its checkpoint is pending: it
		// was already emitted by this split.
		s.skipped++
		return false, nil
	}
	if s.holding() && seq > s.pos.StreamSeq+1 {
		// A topic's sequences have no holes but the messages it dropped
		// (retention, a size limit, a purge): those the re-read still had
		// to read are gone.
		s.expire(s.pos.StreamSeq+1, min(seq-1, s.cfg.Rewind.HoldUntil), seq)
	}
	if s.cfg.Rewind != nil {
		s.src.readSeq.Store(seq)
	}
	publish := mtime.FromTime(md.Timestamp)
	s.pos = position{V: positionVersion, Subscription: s.cfg.Subscription, StreamSeq: seq,
		ConsumerSeq: md.Sequence.Consumer, PublishMillis: int64(publish), Ack: m.Reply(), Track: s.pos.Track}
	src := &contract.SourcePos{Source: s.srcName, Offset: int64(seq)}
	hdr := m.Headers()

	if s.seen != nil && s.cfg.IDAttribute != "" {
		if id := hdr.Get(s.cfg.IDAttribute); id != "" && s.duplicate(id, publish, m.Data(), seq) {
			return false, nil
		}
	}
	value, reason, msg := s.messageRow(m.Data(), hdr, publish)
	if value == nil {
		*dst = s.reject(m.Data(), reason, msg, publish, src)
		return true, nil
	}
	if id := s.rowID(value); id != "" && s.duplicate(id, publish, m.Data(), seq) {
		return false, nil
	}
	t := publish
	switch {
	case s.cfg.TimestampAttribute != "":
		a := hdr.Get(s.cfg.TimestampAttribute)
		if a == "" {
			*dst = s.reject(m.Data(), ReasonBadTimestamp, fmt.Sprintf("attribute %s is missing", s.cfg.TimestampAttribute), publish, src)
			return true, nil
		}
		ts, err := row.ToTimestamp(a)
		if err != nil {
			*dst = s.reject(m.Data(), timestampReason(err, ReasonBadTimestamp), fmt.Sprintf("attribute %s: %v", s.cfg.TimestampAttribute, err), publish, src)
			return true, nil
		}
		t = ts
	case s.tsField >= 0:
		ts, err := row.ToTimestamp(value.Values[s.tsField])
		if err != nil {
			*dst = s.reject(m.Data(), timestampReason(err, ReasonBadTimestamp), fmt.Sprintf("field %s: %v", s.cfg.TimestampField, err), publish, src)
			return true, nil
		}
		t = ts
	}
	if s.cfg.MaxFutureSkew > 0 {
		if limit := now.Add(mtime.FromDuration(s.cfg.MaxFutureSkew)); t > limit {
			*dst = s.reject(m.Data(), ReasonTimestampInFuture, fmt.Sprintf("event time %s is %s ahead of processing time %s, more than max_future_skew %s "+
				"(a wrong clock or unit upstream? raise max_future_skew if events are stamped ahead on purpose)",
				t, time.Duration(t-now)*time.Millisecond, now, s.cfg.MaxFutureSkew), publish, src)
			return true, nil
		}
	}
	if s.cfg.Rewind != nil && t < s.cfg.Rewind.SkipBefore {
		s.rewindSkipped++
		s.src.rewindSkipped.Add(1)
		return false, nil
	}
	s.wm.observe(t)
	for cur := s.maxEvent.Load(); int64(t) > cur && !s.maxEvent.CompareAndSwap(cur, int64(t)); cur = s.maxEvent.Load() {
	}
	s.pos.Track.note(t, seq)
	s.pos.Track.prune(s.wm.wm, s.horizon)
	*dst = contract.Element{Value: value, Time: t, Window: window.Global, Pane: window.NoFiring, Source: src}
	return true, nil
}

// messageRow reads a message into a row of the source's schema: its
// payload in the source's format, then the attributes the source copies
// into fields. On failure it returns a nil row, the reject reason and a
// message.
func (s *split) messageRow(data []byte, hdr nats.Header, publish mtime.Time) (*row.Row, string, string) {
	var r *row.Row
	switch s.cfg.Format {
	case FormatRaw:
		r = row.New(s.cfg.Schema)
		r.Values[0], r.Values[1], r.Values[2], r.Values[3] = rawValues(data, hdr, publish)
	case FormatString:
		if !utf8.Valid(data) {
			return nil, ReasonMalformedPayload, "the payload is not UTF-8 text (format string)"
		}
		r = row.New(s.cfg.Schema)
		r.Values[0] = string(data)
	case FormatAvro:
		var reason, msg string
		if r, reason, msg = s.decodeAvro(data); r == nil {
			return nil, reason, msg
		}
	default:
		var reason, msg string
		if r, reason, msg = s.decode(data); r == nil {
			return nil, reason, msg
		}
	}
	if len(s.cfg.AttributeFields) > 0 || s.cfg.AttributesMap != "" {
		s.addAttributes(r, hdr)
	}
	return r, "", ""
}

// addAttributes fills the attribute fields that end r's schema
// (SourceConfig.AttributeFields, AttributesMap) from hdr.
func (s *split) addAttributes(r *row.Row, hdr nats.Header) {
	i := s.cfg.payload.Len()
	for _, name := range s.cfg.AttributeFields {
		if v := hdr.Get(name); v != "" {
			r.Values[i] = v
		}
		i++
	}
	if s.cfg.AttributesMap != "" {
		if attrs := attributesOf(hdr); attrs != nil {
			r.Values[i] = attrs
		} else {
			r.Values[i] = map[string]any{}
		}
	}
}

// decode reads a JSON object into a row of the schema, its payload's
// fields filled; on failure it returns a nil row, the reject reason and a
// message.
func (s *split) decode(data []byte) (*row.Row, string, string) {
	if r := row.New(s.cfg.Schema); row.DecodeFlatJSON(data, s.cfg.payload, r) {
		return s.checkRequired(r) // the common flat shape, without a map
	}
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil {
		return nil, ReasonMalformedJSON, err.Error()
	}
	if obj == nil {
		return nil, ReasonMalformedJSON, "want a JSON object, got null"
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, ReasonMalformedJSON, "extra data after the JSON object"
	}
	r := row.New(s.cfg.Schema)
	for i, f := range s.cfg.payload.Fields {
		v, err := row.FromJSON(obj[f.Name], f.Type)
		if err != nil {
			if i == s.tsField {
				return nil, timestampReason(err, ReasonBadTimestamp), fmt.Sprintf("field %s: %v", f.Name, err)
			}
			return nil, timestampReason(err, ReasonSchemaMismatch), fmt.Sprintf("field %s: %v", f.Name, err)
		}
		r.Values[i] = v
	}
	return s.checkRequired(r)
}

// checkRequired returns r, or a reject's reason and message when a
// required field of r is null.
func (s *split) checkRequired(r *row.Row) (*row.Row, string, string) {
	if msg := r.MissingRequired(s.cfg.required); msg != "" {
		return nil, ReasonSchemaMismatch, msg
	}
	return r, "", ""
}

// timestampReason is the reason of a reject for a conversion error err:
// ReasonTimestampInSeconds for a timestamp in seconds, else def.
func timestampReason(err error, def string) string {
	if errors.Is(err, row.ErrTimestampInSeconds) {
		return ReasonTimestampInSeconds
	}
	return def
}

func (s *split) reject(data []byte, reason, msg string, t mtime.Time, src *contract.SourcePos) contract.Element {
	elem := string(data)
	if !utf8.Valid(data) {
		// Text would mangle it (JSON replaces what is not UTF-8): the
		// reject keeps the payload whole, in base64.
		elem = base64.StdEncoding.EncodeToString(data)
		msg += " (the element is the payload in base64: it is not UTF-8 text)"
	}
	return contract.Element{
		Value: contract.Reject{Element: elem, Step: s.cfg.Step, Reason: reason, Message: msg, Source: src},
		Time:  t, Window: window.Global, Pane: window.NoFiring, Source: src,
	}
}

// rawValues returns the values of RawSchema's fields for a message: its
// data, attributes (nil without any), ID (nil without one) and publish
// time.
func rawValues(data []byte, hdr nats.Header, publish mtime.Time) (d, attrs, id, t any) {
	if v := hdr.Values(jetstream.MsgIDHeader); len(v) > 0 {
		id = v[0]
	}
	if a := attributesOf(hdr); a != nil {
		attrs = a
	}
	return string(data), attrs, id, publish
}

// attributesOf returns a message's attributes, its headers but NATS's
// own (the message ID among them), or nil when it has none.
func attributesOf(hdr nats.Header) map[string]any {
	var attrs map[string]any
	for k, v := range hdr {
		if k == jetstream.MsgIDHeader || len(k) >= 5 && strings.EqualFold(k[:5], "nats-") || len(v) == 0 {
			continue
		}
		if attrs == nil {
			attrs = make(map[string]any, len(hdr))
		}
		attrs[k] = v[0]
	}
	return attrs
}
