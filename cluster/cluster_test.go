package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/internal/natscluster"
	"github.com/weir-dev/weir/state"
)

func join(t *testing.T, nc *nats.Conn, addr string) *Member {
	t.Helper()
	return joinWith(t, Config{Name: "t1", Conn: nc, Address: addr, LeaseTTL: time.Second})
}

// joinWith joins cfg's cluster; the member leaves when the test ends.
func joinWith(t *testing.T, cfg Config) *Member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := Join(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = m.Leave(ctx)
	})
	return m
}

func connect(t *testing.T, urls string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func openStore(t *testing.T) *state.Store {
	t.Helper()
	s, err := state.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func put(s *state.Store, key string, value []byte) error {
	var w state.Write
	w.Put(key, value)
	return s.Apply(&w)
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !await.Until(d, 50*time.Millisecond, cond) {
		t.Fatalf("%s: not within %s", what, d)
	}
}

// TestLeaderLogAndTakeover runs two members over a three-server NATS
// cluster with R3 log and bucket: the leader's writes (one larger than the
// servers' payload limit) reach the follower's store; a leader that stops
// renewing (a pause) is taken over within the lease, its later write is
// refused and committed nowhere; the new leader writes on with one NATS
// server of three down; Members shows who leads.
func TestLeaderLogAndTakeover(t *testing.T) {
	nc := natscluster.Start(t, 3, 256<<10)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	a := join(t, connect(t, nc.URLs()), "http://a")
	b := join(t, connect(t, nc.URLs()), "http://b")
	storeA, storeB := openStore(t), openStore(t)

	la, err := a.Campaign(ctx, storeA)
	if err != nil {
		t.Fatal(err)
	}
	storeA.SetReplicator(la)
	big := bytes.Repeat([]byte("0123456789abcdef"), 60<<10) // 960 KiB: four parts at 256 KiB
	if err := put(storeA, "r/one", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := put(storeA, "r/big", big); err != nil {
		t.Fatal(err)
	}

	type result struct {
		l   *Leadership
		err error
	}
	won := make(chan result, 1)
	go func() {
		l, err := b.Campaign(ctx, storeB)
		won <- result{l, err}
	}()
	waitFor(t, 30*time.Second, "the follower applies the leader's writes", func() bool {
		v, err := storeB.Get("r/big")
		return err == nil && bytes.Equal(v, big)
	})
	if v, err := storeB.Get("r/one"); err != nil || string(v) != "1" {
		t.Fatalf("follower: r/one = %q, %v", v, err)
	}
	// Records reach each member through its watch of the bucket, a moment
	// after they are written.
	var members []MemberInfo
	waitFor(t, 10*time.Second, "b lists a as the leader and itself", func() bool {
		members, err = b.Members(ctx)
		return err == nil && len(members) == 2 && members[0].ID == a.ID() && members[0].Leader && !members[1].Leader
	})

	// a pauses: it stops renewing without knowing it.
	close(la.stop)
	<-la.stopped
	paused := time.Now()
	var r result
	select {
	case r = <-won:
	case <-time.After(30 * time.Second):
		t.Fatal("b did not take the lease over")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	took := time.Since(paused)
	t.Logf("takeover %s after the leader's last renewal stopped (lease 1s)", took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Errorf("takeover took %s with a 1s lease", took)
	}
	if r.l.Term() != 2 {
		t.Errorf("term %d, want 2", r.l.Term())
	}
	// a, still believing it leads, writes: the log refuses, nothing commits.
	if err := put(storeA, "r/late", []byte("x")); !errors.Is(err, state.ErrNotReplicated) || !errors.Is(err, ErrLeadershipLost) {
		t.Fatalf("a fenced leader's write: %v", err)
	}
	if _, err := storeA.Get("r/late"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("the fenced write was committed locally: %v", err)
	}
	select {
	case <-la.Lost():
	default:
		t.Fatal("the fenced leader does not know it lost the leadership")
	}

	storeB.SetReplicator(r.l)
	nc.StopServer(0)
	if err := put(storeB, "r/two", []byte("2")); err != nil {
		t.Fatalf("writing with one NATS server of three down: %v", err)
	}
	if _, err := storeB.Get("r/late"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("the fenced write reached the new leader: %v", err)
	}
	if err := nc.StartServer(0); err != nil {
		t.Fatal(err)
	}

	// A third member starting from nothing holds everything, and nothing
	// of the fenced write.
	c := join(t, connect(t, nc.URLs()), "http://c")
	storeC := openStore(t)
	cctx, ccancel := context.WithCancel(ctx)
	go func() { _, _ = c.Campaign(cctx, storeC) }()
	waitFor(t, 30*time.Second, "a new member applies the whole log", func() bool {
		v, err := storeC.Get("r/two")
		return err == nil && string(v) == "2"
	})
	ccancel()
	for _, k := range []string{"r/one", "r/big"} {
		if _, err := storeC.Get(k); err != nil {
			t.Fatalf("new member: %s: %v", k, err)
		}
	}
	if _, err := storeC.Get("r/late"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("the fenced write reached a new member: %v", err)
	}
	waitFor(t, 10*time.Second, "c lists b as the leader, a and itself", func() bool {
		members, err = c.Members(ctx)
		return err == nil && len(members) == 3 && members[0].ID == b.ID() && members[0].Leader
	})
	if err := b.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	// A read may be answered by a replica of the bucket a moment behind
	// the others (JetStream's direct gets), so the lease's end is waited
	// for, not read once.
	var held *Lease
	waitFor(t, 10*time.Second, "the lease gone after its holder left", func() bool {
		held, err = c.Leader(ctx)
		return err == nil && held == nil
	})
	// The next leader's term follows the one that left.
	lc, err := c.Campaign(ctx, storeC)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Resign()
	if lc.Term() != 3 {
		t.Fatalf("term after a leader left: %d, want 3", lc.Term())
	}
}

// TestForeignReplica: a store that holds more of a log than the
// cluster's log is refused.
func TestForeignReplica(t *testing.T) {
	nc := natscluster.Start(t, 1, 0)
	m := join(t, connect(t, nc.URLs()), "http://a")
	s := openStore(t)
	if err := s.ApplyReplicated(5, mustRepr(t)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := m.Campaign(ctx, s); !errors.Is(err, ErrForeignReplica) {
		t.Fatalf("campaign with a foreign store: %v", err)
	}
}

// mustRepr is the representation of a one-key batch, taken from a store
// writing through a log that records it.
func mustRepr(t *testing.T) []byte {
	t.Helper()
	s := openStore(t)
	rec := &recordLog{}
	s.SetReplicator(rec)
	if err := put(s, "r/x", []byte("y")); err != nil {
		t.Fatal(err)
	}
	return rec.repr
}

type recordLog struct{ repr []byte }

func (r *recordLog) Append(size int, build func(uint64) []byte) error {
	r.repr = append([]byte(nil), build(1)...)
	return nil
}

// TestBaseImageCutsTheLog: once the leader appended BaseEvery bytes, a
// base image of its store is stored and the log cut; a member with an
// empty store is told to restore the base image, and holds everything
// once it did and followed the rest of the log.
func TestBaseImageCutsTheLog(t *testing.T) {
	nc := natscluster.Start(t, 1, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := connect(t, nc.URLs())
	a, err := Join(ctx, Config{Name: "t2", Conn: conn, Address: "http://a", LeaseTTL: time.Second, BaseEvery: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Leave(ctx)
	storeA := openStore(t)
	la, err := a.Campaign(ctx, storeA)
	if err != nil {
		t.Fatal(err)
	}
	storeA.SetReplicator(la)
	value := bytes.Repeat([]byte("v"), 16<<10)
	for i := range 20 {
		if err := put(storeA, "r/k"+strconv.Itoa(i), value); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "the log is cut after a base image", func() bool {
		info, err := a.stream.Info(ctx)
		return err == nil && info.State.FirstSeq > 5
	})
	if err := put(storeA, "r/after", []byte("1")); err != nil {
		t.Fatal(err)
	}

	b, err := Join(ctx, Config{Name: "t2", Conn: connect(t, nc.URLs()), Address: "http://b", LeaseTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Leave(ctx)
	if _, err := b.Campaign(ctx, openStore(t)); !errors.Is(err, ErrReplicaBehind) {
		t.Fatalf("an empty store's campaign: %v, want ErrReplicaBehind", err)
	}
	dir := filepath.Join(t.TempDir(), "state")
	seq, err := b.RestoreBase(ctx, dir)
	if err != nil || seq == 0 {
		t.Fatalf("restore: %d, %v", seq, err)
	}
	storeB, err := state.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer storeB.Close()
	if got, err := storeB.ReplicatedSeq(); err != nil || got != seq {
		t.Fatalf("restored store holds sequence %d (%v), the base image says %d", got, err, seq)
	}
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	go func() { _, _ = b.Campaign(cctx, storeB) }()
	waitFor(t, 30*time.Second, "the restored member follows the rest of the log", func() bool {
		v, err := storeB.Get("r/after")
		return err == nil && string(v) == "1"
	})
	for i := range 20 {
		if v, err := storeB.Get("r/k" + strconv.Itoa(i)); err != nil || !bytes.Equal(v, value) {
			t.Fatalf("r/k%d after the restore: %d bytes, %v", i, len(v), err)
		}
	}
}

// TestFollowerWaitsTheLeadersLease: a follower judges the lease by the
// leader's own lease, not its own --cluster-lease. Here the leader's is
// 4s (renewed every second) and the follower's 200ms: before, the
// follower took a healthy leader's lease between two renewals. It now
// waits while the leader renews, and takes over once the leader stops
// renewing, after the leader's lease.
func TestFollowerWaitsTheLeadersLease(t *testing.T) {
	nc := natscluster.Start(t, 1, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	member := func(addr string, ttl time.Duration) *Member {
		return joinWith(t, Config{Name: "t3", Conn: connect(t, nc.URLs()), Address: addr, LeaseTTL: ttl})
	}
	const leaderTTL = 4 * time.Second
	a, b := member("http://a", leaderTTL), member("http://b", 200*time.Millisecond)
	la, err := a.Campaign(ctx, openStore(t))
	if err != nil {
		t.Fatal(err)
	}
	won := make(chan *Leadership, 1)
	go func() {
		if l, err := b.Campaign(ctx, openStore(t)); err == nil {
			won <- l
		}
	}()
	select {
	case <-won:
		t.Fatal("the follower took the lease of a leader that renews it")
	case <-la.Lost():
		t.Fatal("the leader lost its lease while renewing it")
	case <-time.After(3 * time.Second):
	}
	close(la.stop) // a pauses: it stops renewing without knowing it
	<-la.stopped
	paused := time.Now()
	select {
	case <-won:
	case <-time.After(30 * time.Second):
		t.Fatal("the follower did not take the lease over once the leader stopped renewing")
	}
	// The leader renewed at most a quarter of its lease before the pause.
	if waited := time.Since(paused); waited < 3*leaderTTL/4 {
		t.Fatalf("the follower took over %s after the leader's last renewals, want at least %s (the leader's lease less a quarter)", waited, 3*leaderTTL/4)
	}
}

// TestMembersNameSettingsThatDiffer: the members list names, for each
// member, the settings whose values are not the leader's (the leader runs
// every job with its own, so a member that takes over would change them).
func TestMembersNameSettingsThatDiffer(t *testing.T) {
	nc := natscluster.Start(t, 1, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	member := func(addr string, settings map[string]string) *Member {
		return joinWith(t, Config{Name: "t4", Conn: connect(t, nc.URLs()), Address: addr, LeaseTTL: time.Second, Settings: settings})
	}
	a := member("http://a", map[string]string{"checkpoint-interval": "1s", "file-roots": "/srv/a", "pubsub-project": "p"})
	b := member("http://b", map[string]string{"checkpoint-interval": "1s", "file-roots": "/srv/a", "pubsub-project": "p"})
	c := member("http://c", map[string]string{"checkpoint-interval": "5s", "file-roots": "/srv/c", "allowed-sql-hosts": "db"})
	if _, err := a.Campaign(ctx, openStore(t)); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{a.ID(): nil, b.ID(): nil, c.ID(): {"allowed-sql-hosts", "checkpoint-interval", "file-roots", "pubsub-project"}}
	var got map[string][]string
	waitFor(t, 10*time.Second, "the members list names c's settings", func() bool {
		ms, err := b.Members(ctx)
		if err != nil || len(ms) != 3 || !ms[0].Leader {
			return false
		}
		got = map[string][]string{}
		for _, m := range ms {
			got[m.ID] = m.SettingsDiffer
		}
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
}

// TestLostLeadershipCancelsAnAppend: a leader's write in flight while NATS
// is unreachable gives up when the leadership is lost, instead of waiting
// out the append's timeout — so a cut-off leader's jobs stop at once. The
// write fails with the leadership's loss and a cancelled publication (a
// timeout would say the deadline passed) and is committed nowhere.
func TestLostLeadershipCancelsAnAppend(t *testing.T) {
	nc := natscluster.Start(t, 1, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A long lease: the renewals do not end the leadership during the test.
	m := joinWith(t, Config{Name: "t5", Conn: connect(t, nc.URLs()), Address: "http://a", LeaseTTL: time.Minute})
	store := openStore(t)
	l, err := m.Campaign(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	store.SetReplicator(l)
	if err := put(store, "r/before", []byte("1")); err != nil {
		t.Fatal(err)
	}
	nc.StopServer(0)
	done := make(chan error, 1)
	go func() { done <- put(store, "r/cut", []byte("2")) }()
	// The write is in flight once it holds the append lock for a while
	// (the renewal loop holds it only to read the log's end).
	held := 0
	waitFor(t, 30*time.Second, "the write blocked on the unreachable log", func() bool {
		if l.appendMu.TryLock() {
			l.appendMu.Unlock()
			held = 0
			return false
		}
		held++
		return held >= 3
	})
	l.fail(fmt.Errorf("%w: the test ends it", ErrLeadershipLost))
	var werr error
	select {
	case werr = <-done:
	case <-time.After(2 * appendTimeout): // a hang; a timeout fails below
		t.Fatal("the write did not return after the leadership was lost")
	}
	if !errors.Is(werr, ErrLeadershipLost) || !errors.Is(werr, context.Canceled) {
		t.Fatalf("the write in flight: %v, want the leadership lost and the publication cancelled", werr)
	}
	if _, err := store.Get("r/cut"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("the cancelled write was committed locally: %v", err)
	}
}
