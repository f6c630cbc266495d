// This file holds the split's position and acknowledgement: the position
// encoding a checkpoint records, Position, Ack (cumulative, up to a
// position) and Close.

package pubsub

import (
	"context"
	"encoding/json"
	"fmt"
)

// position is a split's position: the last message Read handled.
type position struct {
	V            int    `json:"v"`
	Subscription string `json:"subscription"`
	// StreamSeq and ConsumerSeq are the stream and delivery sequences of the
	// last message handled (emitted, rejected or dropped as a duplicate).
	StreamSeq   uint64 `json:"stream_seq"`
	ConsumerSeq uint64 `json:"consumer_seq,omitempty"`
	// PublishMillis is its publish time.
	PublishMillis int64 `json:"publish_ms,omitempty"`
	// Ack is its acknowledgement subject: acknowledging it acknowledges
	// everything before it too (AckAll).
	Ack string `json:"ack,omitempty"`
	// Track is the event-time table of what the split read (rewind.go);
	// nil in positions written before it existed.
	Track *Track `json:"track,omitempty"`
}

const positionVersion = 1

func decodePosition(b []byte) (position, error) {
	var p position
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("decoding a Pub/Sub position: %w: %w", ErrInvalidPosition, err)
	}
	if p.V != positionVersion {
		return p, fmt.Errorf("Pub/Sub position version %d, want %d: %w", p.V, positionVersion, ErrInvalidPosition)
	}
	return p, nil
}

// PositionSequence returns the subscription of a ReadFromPubSub split's
// position (a checkpoint's or a snapshot's) and the stream sequence of
// the last message it counts as read (0: none). It decodes only: no
// broker is asked.
func PositionSequence(position []byte) (subscription string, seq uint64, err error) {
	p, err := decodePosition(position)
	if err != nil {
		return "", 0, err
	}
	return p.Subscription, p.StreamSeq, nil
}

// Position returns the position after the last message Read handled.
func (s *split) Position() ([]byte, error) {
	p := s.pos
	p.V = positionVersion
	if p.Track != nil {
		tr := *p.Track
		if !s.holding() {
			// The highest watermark the subscription's reader reached: a
			// restart starts the estimate again from −∞, but windows that
			// expired before it stay expired for a re-read.
			tr.Watermark = max(tr.Watermark, int64(s.wm.wm))
		}
		p.Track = &tr
	}
	return json.Marshal(p)
}

// Ack acknowledges, cumulatively, every message up to pos. It waits for the
// server's confirmation (bounded by ctx). Acknowledging a position at or
// before one already acknowledged does nothing.
func (s *split) Ack(ctx context.Context, pos []byte) error {
	p, err := decodePosition(pos)
	if err != nil {
		return err
	}
	if p.Subscription != s.cfg.Subscription {
		return fmt.Errorf("acknowledging %s with a position of %s: %w", s.cfg.Subscription, p.Subscription, ErrInvalidPosition)
	}
	if p.Ack == "" || p.StreamSeq <= s.acked.Load() {
		return nil
	}
	if _, err := s.b.nc.RequestWithContext(ctx, p.Ack, []byte("+ACK")); err != nil {
		return apiErr(fmt.Sprintf("acknowledging %s up to sequence %d", s.cfg.Subscription, p.StreamSeq), err)
	}
	for {
		old := s.acked.Load()
		if p.StreamSeq <= old || s.acked.CompareAndSwap(old, p.StreamSeq) {
			return nil
		}
	}
}

// Close waits for the fetch in flight to end (at most FetchWait; not at
// all while the connection is down) and releases the split. Messages
// delivered but not acknowledged stay in the subscription.
func (s *split) Close() error {
	s.hangUpBell()
	if s.batch != nil {
		if s.b.nc.IsConnected() {
			for range s.batch.Messages() {
			}
		}
		// Disconnected, the fetch may not end for tens of seconds; what
		// it would still deliver is redelivered after the ack wait.
		s.batch = nil
	}
	s.handOff()
	if s.skipped > 0 {
		s.b.log.Debug("source closed", "subscription", s.cfg.Subscription, "dropped_duplicates", s.skipped)
	}
	if s.rewindSkipped > 0 {
		s.b.log.Info("re-read: skipped messages of windows that had expired before the replacement", "subscription", s.cfg.Subscription,
			"skipped", s.rewindSkipped, "skip_before", s.cfg.Rewind.SkipBefore)
	}
	return nil
}
