package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// leaseKey is the bucket's key of the leader's lease; termKey records
// the term of a leader that left (Leave), which outlives its deleted
// lease.
const (
	leaseKey = "leader"
	termKey  = "term"
)

// lastTerm is the term termKey records, 0 if none.
func (m *Member) lastTerm(ctx context.Context) uint64 {
	e, err := m.kv.Get(ctx, termKey)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(string(e.Value()), 10, 64)
	return n
}

// Lease is the leader's lease as the bucket holds it.
type Lease struct {
	Member  string `json:"member"`
	Address string `json:"address"`
	// Term counts the leaderships: each takeover adds one.
	Term uint64 `json:"term"`
	// TTLMillis is the leader's own --cluster-lease, in milliseconds:
	// how long the lease lasts without a renewal (takeoverAfter). 0 in
	// leases written before it was recorded.
	TTLMillis int64 `json:"ttl_ms,omitempty"`
}

// takeoverAfter returns how long a follower waits, with lease (nil when
// unreadable) unchanged, before it takes the lease over: the leader's own
// lease, which its renewals and its step-down keep to, whatever this
// member's --cluster-lease. With this member's own instead, a member
// given a shorter lease than the leader's took a healthy leader's lease
// between two of its renewals, again and again.
func (m *Member) takeoverAfter(lease *Lease) time.Duration {
	if lease == nil || lease.TTLMillis <= 0 {
		return m.cfg.LeaseTTL
	}
	return time.Duration(lease.TTLMillis) * time.Millisecond
}

// Replica is the store a member applies the cluster's log to
// (*state.Store).
type Replica interface {
	// ApplyReplicated commits one entry of the log, which ends at seq.
	ApplyReplicated(seq uint64, repr []byte) error
	// ReplicatedSeq is the sequence of the last entry the store holds.
	ReplicatedSeq() (uint64, error)
}

// ErrLeadershipLost is what appends answer once the member is no longer
// the leader: the lease was taken over or could not be renewed in time,
// or a later leader's entry is in the log.
var ErrLeadershipLost = errors.New("this member no longer leads the cluster")

// ErrForeignReplica: the member's store holds entries the cluster's log
// does not (another cluster's data directory, or a log that was deleted).
var ErrForeignReplica = errors.New("the data directory does not belong to this cluster's log")

func (m *Member) readLease(ctx context.Context) (*Lease, uint64, error) {
	e, err := m.kv.Get(ctx, leaseKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("cluster %s: reading the lease: %w", m.cfg.Name, err)
	}
	var l Lease
	if err := json.Unmarshal(e.Value(), &l); err != nil {
		return nil, e.Revision(), nil // an unreadable lease is taken over like an expired one
	}
	return &l, e.Revision(), nil
}

// Leader returns the current lease holder, nil when nobody holds it.
func (m *Member) Leader(ctx context.Context) (*Lease, error) {
	l, _, err := m.readLease(ctx)
	return l, err
}

// Leadership is this member's lease, held until Lost is closed. Its
// Append (state.Replicator) writes to the cluster's log.
type Leadership struct {
	m     *Member
	lease Lease

	// appendMu serialises appends (the store already does; this guards
	// last against the renewal loop's reads); a leaf.
	appendMu  sync.Mutex
	last      uint64 // the log's last sequence as this leader left it
	sinceBase int64  // bytes appended since the last base image
	basing    bool   // a base image is being stored

	// rev is the lease's revision as this leader last wrote it (lead,
	// renew): Leave gives the lease up at it, without a read that a
	// bucket replica behind the others could answer stale.
	rev atomic.Uint64
	// resigned is set when Resign ended the leadership (not a lost
	// renewal): its lease is still this member's to give up.
	resigned atomic.Bool

	lostOnce sync.Once
	lost     chan struct{}
	lostErr  error // set before lost is closed
	// writes is cancelled with lost: an append in flight when the
	// leadership is lost (NATS unreachable) gives up at once instead of
	// waiting out appendTimeout, so that the jobs stop without delay.
	writes      context.Context
	cancelWrite context.CancelFunc
	stop        chan struct{}
	stopped     chan struct{}
}

// Campaign follows the log into replica until this member holds the
// lease, then brings replica to the log's end and fences the log (a
// marker entry earlier leaders' appends cannot pass). It returns the
// leadership; ctx ending stops the campaign. While it campaigns, the
// member's record says how far its replica is.
func (m *Member) Campaign(ctx context.Context, replica Replica) (*Leadership, error) {
	f, err := m.newFollower(replica)
	if err != nil {
		return nil, err
	}
	tick := time.NewTicker(m.cfg.LeaseTTL / 4)
	defer tick.Stop()
	// A change of the lease (a leader leaving deletes it) wakes the
	// campaign at once; the ticker measures an unchanged lease's age.
	var changed <-chan jetstream.KeyValueEntry
	if w, err := m.kv.Watch(ctx, leaseKey, jetstream.UpdatesOnly()); err == nil {
		defer w.Stop()
		changed = w.Updates()
	}
	var (
		seenRev uint64
		seenAt  time.Time
	)
	for {
		if err := f.catchUp(ctx); errors.Is(err, errLogRead) && ctx.Err() == nil {
			m.log.Warn("could not read the cluster's log; retrying", "error", err)
		} else if err != nil {
			return nil, err
		}
		m.SetStatus(MemberStatus{Role: RoleFollower, LogSequence: f.applied})
		lease, rev, err := m.readLease(ctx)
		switch {
		case err != nil:
			m.log.Warn("could not read the lease", "error", err)
		case lease == nil && rev == 0:
			// A leader that left deleted the lease: the next term follows the
			// highest one recorded (termKey), seen in the lease or in the
			// log's markers.
			term := max(f.term, m.lastTerm(ctx)) + 1
			if rev, err := m.kv.Create(ctx, leaseKey, m.leaseValue(term)); err == nil {
				return m.lead(ctx, f, rev, term)
			}
		case rev != seenRev:
			seenRev, seenAt = rev, m.cfg.Now()
			if lease != nil {
				f.term = max(f.term, lease.Term)
			}
		case m.cfg.Now().Sub(seenAt) >= m.takeoverAfter(lease):
			term := f.term + 1
			if lease != nil {
				term = max(term, lease.Term+1)
			}
			if nrev, err := m.kv.Update(ctx, leaseKey, m.leaseValue(term), rev); err == nil {
				prev := "an unreadable lease"
				if lease != nil {
					prev = "member " + lease.Member
				}
				m.log.Info("took the lease over", "from", prev, "unchanged_for", m.cfg.Now().Sub(seenAt).String())
				return m.lead(ctx, f, nrev, term)
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		case _, ok := <-changed:
			if !ok {
				changed = nil
			}
		}
	}
}

func (m *Member) leaseValue(term uint64) []byte {
	b, _ := json.Marshal(Lease{Member: m.id, Address: m.cfg.Address, Term: term, TTLMillis: m.cfg.LeaseTTL.Milliseconds()})
	return b
}

// lead fences the log once the replica holds all of it, and starts
// renewing the lease.
func (m *Member) lead(ctx context.Context, f *follower, rev, term uint64) (*Leadership, error) {
	l := &Leadership{m: m, lease: Lease{Member: m.id, Address: m.cfg.Address, Term: term},
		lost: make(chan struct{}), stop: make(chan struct{}), stopped: make(chan struct{})}
	l.writes, l.cancelWrite = context.WithCancel(context.Background())
	renewed := m.cfg.Now()
	for {
		err := f.catchUp(ctx)
		if err == nil {
			var seq uint64
			if seq, err = m.publishMarker(ctx, f.read, term); err == nil {
				l.last = seq
				break
			}
			if !wrongSequence(err) {
				err = fmt.Errorf("%w: fencing it: %w", errLogRead, err)
			}
		}
		switch {
		case wrongSequence(err):
			// An earlier leader appended meanwhile: read it too, then fence.
		case errors.Is(err, errLogRead):
			// NATS did not answer: try again in a moment, holding the lease.
			m.log.Warn("could not fence the cluster's log; retrying", "error", err)
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(m.cfg.LeaseTTL / 8):
			}
		default:
			return nil, err
		}
		if m.cfg.Now().Sub(renewed) > m.cfg.LeaseTTL/2 {
			nrev, err := m.kv.Update(ctx, leaseKey, m.leaseValue(term), rev)
			if err != nil {
				return nil, fmt.Errorf("cluster %s: the lease was taken while this member fenced the log: %w", m.cfg.Name, err)
			}
			rev, renewed = nrev, m.cfg.Now()
		}
	}
	m.SetStatus(MemberStatus{Role: RoleLeader, LogSequence: f.applied})
	m.log.Info("leads the cluster", "term", term, "log_sequence", l.last)
	l.rev.Store(rev)
	m.mu.Lock()
	m.leading = l
	m.mu.Unlock()
	go l.renew(rev, renewed)
	return l, nil
}

// renew renews the lease every quarter of it. The leadership is lost
// when a renewal is refused (another member took the lease) or when none
// succeeded for half a lease: the others take over after a whole lease
// without a change, so this member stops first.
func (l *Leadership) renew(rev uint64, renewed time.Time) {
	defer close(l.stopped)
	m := l.m
	t := time.NewTicker(m.cfg.LeaseTTL / 4)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.lost:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.LeaseTTL/4)
		nrev, err := m.kv.Update(ctx, leaseKey, m.leaseValue(l.lease.Term), rev)
		cancel()
		switch {
		case err == nil:
			rev, renewed = nrev, m.cfg.Now()
			l.rev.Store(nrev)
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyNotFound) || wrongSequence(err):
			l.fail(fmt.Errorf("%w: another member took the lease", ErrLeadershipLost))
			return
		case m.cfg.Now().Sub(renewed) >= m.cfg.LeaseTTL/2:
			l.fail(fmt.Errorf("%w: the lease could not be renewed for %s: %w", ErrLeadershipLost, m.cfg.Now().Sub(renewed).Round(time.Millisecond), err))
			return
		default:
			m.log.Warn("could not renew the lease; retrying", "error", err)
		}
	}
}

// fail ends the leadership with err, unless it ended already; it says
// whether this call ended it.
func (l *Leadership) fail(err error) bool {
	ended := false
	l.lostOnce.Do(func() {
		l.lostErr = err
		l.m.log.Error("lost the cluster's leadership: this member stops writing", "error", err)
		close(l.lost)
		l.cancelWrite()
		ended = true
	})
	return ended
}

// Diverged implements state.Diverger: the leader's store missed a write
// the log holds, so the leader stops (the others' replicas hold the write).
func (l *Leadership) Diverged(err error) {
	l.fail(fmt.Errorf("%w: the leader's store failed to commit a write the log holds: %w", ErrLeadershipLost, err))
}

// Lost is closed when the member no longer leads; Err says why.
func (l *Leadership) Lost() <-chan struct{} { return l.lost }

// Err is why the leadership was lost; nil while it holds.
func (l *Leadership) Err() error {
	select {
	case <-l.lost:
		return l.lostErr
	default:
		return nil
	}
}

// Term is the leadership's term.
func (l *Leadership) Term() uint64 { return l.lease.Term }

// SetJobs says which jobs the leader runs, for its member record.
func (l *Leadership) SetJobs(jobs []string) {
	l.appendMu.Lock()
	seq := l.last
	l.appendMu.Unlock()
	l.m.SetStatus(MemberStatus{Role: RoleLeader, LogSequence: seq, Jobs: jobs})
}

// Resign stops renewing the lease; appends fail afterwards. The lease
// itself goes with Member.Leave (or expires).
func (l *Leadership) Resign() {
	if l.fail(fmt.Errorf("%w: it resigned", ErrLeadershipLost)) {
		l.resigned.Store(true)
	}
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.stopped
}
