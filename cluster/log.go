package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The log's entries. One write of the leader's store is one entry of n
// parts (n ≥ 1, each within the NATS server's payload limit), published
// at consecutive sequences with the header partHeader "i/n"; the entry
// ends at its last part's sequence. A new leader publishes a marker
// (termHeader, no body) before anything else. Parts of an entry that was
// never finished (its leader stopped in between) are followed by a
// marker or by another entry's first part, and are skipped.
const (
	partHeader = "Weir-Part"
	termHeader = "Weir-Term"
)

// appendTimeout bounds one part's publication.
const appendTimeout = 10 * time.Second

// partBytes is the most a part carries: the server's payload limit less
// room for the headers.
func (m *Member) partBytes() int {
	n := int(m.cfg.Conn.MaxPayload()) - 4<<10
	if n < 64<<10 {
		n = 64 << 10
	}
	return n
}

// wrongSequence reports whether err is JetStream refusing a publication
// whose expected last sequence is not the stream's.
func wrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
	}
	return false
}

func (m *Member) publishMarker(ctx context.Context, last, term uint64) (uint64, error) {
	msg := nats.NewMsg(m.subject)
	msg.Header.Set(termHeader, strconv.FormatUint(term, 10))
	pctx, cancel := context.WithTimeout(ctx, appendTimeout)
	defer cancel()
	ack, err := m.js.PublishMsg(pctx, msg, jetstream.WithExpectLastSequence(last))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// Append implements state.Replicator: it publishes the entry build
// returns, part by part, each expecting the log to end where this
// leader's previous part ended. Any refusal ends the leadership.
func (l *Leadership) Append(size int, build func(endSeq uint64) []byte) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.Err(); err != nil {
		return err
	}
	m := l.m
	per := m.partBytes()
	n := (size + per - 1) / per
	if n < 1 {
		n = 1
	}
	repr := build(l.last + uint64(n))
	if len(repr) > size {
		return fmt.Errorf("cluster %s: an entry of %d bytes was announced as %d", m.cfg.Name, len(repr), size)
	}
	chunk := (len(repr) + n - 1) / n
	for i := 0; i < n; i++ {
		lo, hi := min(i*chunk, len(repr)), min((i+1)*chunk, len(repr))
		msg := nats.NewMsg(m.subject)
		msg.Header.Set(partHeader, strconv.Itoa(i+1)+"/"+strconv.Itoa(n))
		msg.Data = repr[lo:hi]
		ctx, cancel := context.WithTimeout(l.writes, appendTimeout)
		ack, err := m.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequence(l.last))
		cancel()
		if err != nil {
			if wrongSequence(err) {
				err = fmt.Errorf("%w: a later leader's entry is in the log", ErrLeadershipLost)
			} else {
				// Whether the part landed is unknown, and with it where the
				// log ends: this member cannot append safely any more.
				err = fmt.Errorf("%w: appending to the log: %w", ErrLeadershipLost, err)
			}
			l.fail(err)
			return err
		}
		l.last = ack.Sequence
	}
	l.sinceBase += int64(len(repr))
	return nil
}

// errLogRead wraps failures to read the log (NATS unreachable for a
// moment): a follower retries them.
var errLogRead = errors.New("reading the cluster's log")

// follower reads the log into a replica, one message at a time.
type follower struct {
	m       *Member
	replica Replica
	// read is the last sequence read; applied the last one applied (the
	// end of the last whole entry).
	read, applied uint64
	parts         [][]byte // the unfinished entry's parts so far
	want          int      // its part count
	// term is the highest leadership term seen in the log's markers or the
	// lease.
	term uint64
}

// newFollower follows the log into r from the last entry r holds; its
// first catchUp checks that r belongs to the log.
func (m *Member) newFollower(r Replica) (*follower, error) {
	seq, err := r.ReplicatedSeq()
	if err != nil {
		return nil, err
	}
	return &follower{m: m, replica: r, read: seq, applied: seq}, nil
}

// catchUp applies the log to the replica up to its current end. A replica
// past the log's end belongs to another log (ErrForeignReplica); one
// before the log's first entry needs the base image (ErrReplicaBehind).
func (f *follower) catchUp(ctx context.Context) error {
	info, err := f.m.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("cluster %s: %w: its state: %w", f.m.cfg.Name, errLogRead, err)
	}
	if f.read > info.State.LastSeq {
		return fmt.Errorf("%w: it holds the log up to sequence %d, the cluster's log ends at %d (use a new data directory for this member)", ErrForeignReplica, f.read, info.State.LastSeq)
	}
	if f.read+1 < info.State.FirstSeq {
		return fmt.Errorf("%w: it holds the log up to sequence %d, the cluster's log starts at %d", ErrReplicaBehind, f.applied, info.State.FirstSeq)
	}
	for f.read < info.State.LastSeq {
		seq := f.read + 1
		msg, err := f.m.stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("%w: log entry %d is gone (the log was cut after a base image)", ErrReplicaBehind, seq)
		}
		if err != nil {
			return fmt.Errorf("cluster %s: %w: entry %d: %w", f.m.cfg.Name, errLogRead, seq, err)
		}
		if err := f.take(seq, msg); err != nil {
			return err
		}
		f.read = seq
	}
	return nil
}

func (f *follower) take(seq uint64, msg *jetstream.RawStreamMsg) error {
	if t := msg.Header.Get(termHeader); t != "" {
		f.parts, f.want = nil, 0
		if n, err := strconv.ParseUint(t, 10, 64); err == nil {
			f.term = max(f.term, n)
		}
		return nil
	}
	i, n, ok := parsePart(msg.Header.Get(partHeader))
	if !ok {
		return fmt.Errorf("cluster %s: log entry %d is not weir's (header %q)", f.m.cfg.Name, seq, msg.Header.Get(partHeader))
	}
	if i == 1 {
		f.parts, f.want = nil, n
	}
	if i != len(f.parts)+1 || n != f.want {
		f.parts, f.want = nil, 0 // a part of an entry whose start was skipped
		return nil
	}
	f.parts = append(f.parts, msg.Data)
	if i < n {
		return nil
	}
	repr := f.parts[0]
	if n > 1 {
		repr = nil
		for _, p := range f.parts {
			repr = append(repr, p...)
		}
	}
	f.parts, f.want = nil, 0
	if err := f.replica.ApplyReplicated(seq, repr); err != nil {
		return fmt.Errorf("cluster %s: %w", f.m.cfg.Name, err)
	}
	f.applied = seq
	return nil
}

func parsePart(h string) (i, n int, ok bool) {
	a, b, found := strings.Cut(h, "/")
	if !found {
		return 0, 0, false
	}
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || i < 1 || n < 1 || i > n {
		return 0, 0, false
	}
	return i, n, true
}
