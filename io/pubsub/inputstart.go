package pubsub

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// inputStartScan is how many of the newest skipped messages InputStart
// reads for their event times: event times are close to publish order, not
// in it, so the newest skipped event time is looked for among several.
const inputStartScan = 128

var _ contract.InputStarter = (*Source)(nil)

// InputStart reports where the job's input starts when its subscription
// is read from a position past messages still on the topic
// (contract.InputStarter): the subscription exists and has acknowledged
// messages the topic still holds (an earlier job of the name read them, or
// it was sought forward), or it does not exist yet and will be created at
// the topic's end (not FromBeginning) while the topic holds messages. start
// is just after the newest event time among the last inputStartScan
// skipped messages, read as the source reads event times (publish time,
// TimestampAttribute or TimestampField); a skipped message whose event time
// cannot be read counts with its publish time. A source re-reading for a
// replacement (SourceConfig.Rewind) skips nothing: its re-read starts at a
// window boundary.
func (s *Source) InputStart(ctx context.Context) (mtime.Time, string, bool, error) {
	if s.cfg.Rewind != nil {
		return 0, "", false, nil
	}
	sub := s.cfg.Subscription
	info, err := s.b.Subscription(ctx, sub)
	var floor uint64
	topic := s.cfg.Topic
	switch {
	case err == nil:
		floor, topic = info.AckFloor, info.Topic
	case errors.Is(err, ErrSubscriptionNotFound) && topic != "":
		if s.cfg.Subscribe.FromBeginning {
			return 0, "", false, nil
		}
		ti, err := s.b.Topic(ctx, topic)
		if err != nil {
			return 0, "", false, fmt.Errorf("ReadFromPubSub %s: reading topic %s: %w", s.cfg.Step, topic, err)
		}
		floor = ti.LastSeq
	case errors.Is(err, ErrSubscriptionNotFound):
		// A named subscription that does not exist: opening the split
		// says so, with its own advice.
		return 0, "", false, nil
	default:
		return 0, "", false, fmt.Errorf("ReadFromPubSub %s: reading subscription %s: %w", s.cfg.Step, sub, err)
	}
	if floor == 0 {
		return 0, "", false, nil
	}
	stream, _, err := topicNames(topic)
	if err != nil {
		return 0, "", false, err
	}
	st, err := s.b.js.Stream(ctx, stream)
	if err != nil {
		return 0, "", false, apiErr("reading topic "+topic, err)
	}
	first := st.CachedInfo().State.FirstSeq
	if first == 0 || floor < first {
		return 0, "", false, nil // what it skipped is no longer on the topic
	}
	from := first
	if floor >= inputStartScan && floor-inputStartScan+1 > first {
		from = floor - inputStartScan + 1
	}
	newest, found := mtime.MinTimestamp, false
	for seq := from; seq <= floor; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue // deleted (a purge, a limit): nothing to read
		}
		t := s.eventTimeOf(m.Data, m.Header, mtime.FromTime(m.Time))
		if t > newest {
			newest = t
		}
		found = true
	}
	if !found {
		return 0, "", false, nil
	}
	start := newest.Add(mtime.Millisecond)
	note := fmt.Sprintf("%s reads subscription %s of topic %s after sequence %d, which it never reads (newest skipped event time %s)",
		s.cfg.Step, sub, topic, floor, newest)
	return start, note, true, nil
}

// eventTimeOf returns a stored message's event time as the source's reads
// would, or its publish time when that cannot be read.
func (s *Source) eventTimeOf(data []byte, hdr nats.Header, publish mtime.Time) mtime.Time {
	switch {
	case s.cfg.TimestampAttribute != "":
		if ts, err := row.ToTimestamp(hdr.Get(s.cfg.TimestampAttribute)); err == nil {
			return ts
		}
	case s.cfg.TimestampField != "" && s.cfg.Schema != nil:
		sp := &split{cfg: &s.cfg, tsField: s.cfg.Schema.Index(s.cfg.TimestampField)}
		if r, _, _ := sp.decode(data); r != nil {
			if ts, err := row.ToTimestamp(r.Values[sp.tsField]); err == nil {
				return ts
			}
		}
	}
	return publish
}
