package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultLeaseTTL is how long a leader's lease lasts without a renewal:
// a member takes the lease over once its revision stayed the same for
// this long. The leader renews it every quarter of it.
const DefaultLeaseTTL = 4 * time.Second

// memberRecordAge is how long the bucket keeps a record nobody rewrote:
// a member that died without leaving disappears from Members after it.
const memberRecordAge = time.Minute

// namePattern is what a cluster's name may be: it names a stream and a
// bucket.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ErrConfig is wrapped by the errors of a configuration that cannot work.
var ErrConfig = errors.New("invalid cluster options")

// Config configures a Member.
type Config struct {
	// Name is the cluster's name: the members of one cluster give the
	// same one. Letters, digits, '-' and '_'.
	Name string
	// Conn is the member's connection to the NATS JetStream cluster.
	Conn *nats.Conn
	// Address is the member's API URL, which the other members forward
	// requests to while it leads.
	Address string
	// Replicas is how many NATS servers keep the log and the bucket; 0:
	// three when the NATS server is part of a cluster, one otherwise.
	Replicas int
	// LeaseTTL is the leader's lease; default DefaultLeaseTTL.
	LeaseTTL time.Duration
	// BaseEvery is how many bytes of log the leader appends between two
	// base images (base.go); 0: DefaultBaseEvery; negative: never.
	BaseEvery int64
	// Now is the clock (default time.Now): the lease's expiry is measured
	// on it, never compared with another machine's.
	Now func() time.Time
	// Logger receives the member's logs; default slog.Default().
	Logger *slog.Logger
	// Settings are the member's settings that decide how the jobs it
	// leads run (name to value: its file roots, its checkpoint interval,
	// ...). The leader runs every job with its own, so Members names the
	// members whose settings differ from the leader's.
	Settings map[string]string
}

// Member is this process's membership of a cluster: its record, the
// lease and the log. Safe for concurrent use.
type Member struct {
	cfg     Config
	id      string
	started time.Time
	js      jetstream.JetStream
	kv      jetstream.KeyValue
	stream  jetstream.Stream
	obs     jetstream.ObjectStore // base images (base.go)
	subject string
	log     *slog.Logger

	// mu guards status, records, recordsReady and leading; a leaf.
	mu     sync.Mutex
	status MemberStatus
	// leading is the member's latest leadership (nil before it first
	// led): Leave resigns it before giving the lease up, so no renewal
	// moves the lease's revision under the delete.
	leading *Leadership
	// records are the members' records by key, as the watch delivers them
	// (watchMembers); recordsReady is closed (and set to nil) once the
	// records the bucket held at the start are in.
	records      map[string]seenRecord
	recordsReady chan struct{}

	stop chan struct{}
	done chan struct{}
}

// MemberStatus is what a member says of itself in its record.
type MemberStatus struct {
	// Role is "leader" or "follower" (RoleLeader, RoleFollower).
	Role string `json:"role"`
	// LogSequence is the last log sequence the member's store holds.
	LogSequence uint64 `json:"log_sequence"`
	// Jobs names the jobs the member runs.
	Jobs []string `json:"jobs,omitempty"`
}

// Roles of a member.
const (
	RoleLeader   = "leader"
	RoleFollower = "follower"
)

// MemberInfo is one member as Members lists it.
type MemberInfo struct {
	ID        string    `json:"id"`
	Address   string    `json:"address"`
	StartTime time.Time `json:"start_time"`
	// LastSeen is when the member last rewrote its record.
	LastSeen time.Time `json:"last_seen"`
	MemberStatus
	// Leader is set on the member that holds the lease.
	Leader bool `json:"leader"`
	// SettingsDiffer names the settings (Config.Settings) whose value in
	// this member's record is not the leader's, sorted; empty for the
	// leader, and while no leader's record is known.
	SettingsDiffer []string `json:"settings_differ,omitempty"`
	// Up is false once the record is older than a lease and three of its
	// renewals (the record is rewritten every renewal).
	Up bool `json:"up"`
}

type memberRecord struct {
	ID        string    `json:"id"`
	Address   string    `json:"address"`
	StartTime time.Time `json:"start_time"`
	// TTLMillis is the member's --cluster-lease in milliseconds, which
	// paces the rewrites of its record (0 in records written before it
	// was recorded).
	TTLMillis int64 `json:"ttl_ms,omitempty"`
	// Settings are the member's Config.Settings.
	Settings map[string]string `json:"settings,omitempty"`
	MemberStatus
}

// Join connects this process to cluster cfg.Name: it creates the
// cluster's bucket and log when they do not exist, writes the member's
// record and keeps it fresh until Leave.
func Join(ctx context.Context, cfg Config) (*Member, error) {
	if !namePattern.MatchString(cfg.Name) {
		return nil, fmt.Errorf("%w: cluster name %q: use 1 to 64 letters, digits, '-' or '_'", ErrConfig, cfg.Name)
	}
	if cfg.Conn == nil {
		return nil, fmt.Errorf("%w: a cluster needs a NATS connection (--nats-url)", ErrConfig)
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.LeaseTTL < 100*time.Millisecond {
		return nil, fmt.Errorf("%w: lease %s: want at least 100ms", ErrConfig, cfg.LeaseTTL)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.BaseEvery == 0 {
		cfg.BaseEvery = DefaultBaseEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
		if cfg.Conn.ConnectedClusterName() != "" {
			cfg.Replicas = 3
		}
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", cfg.Name, err)
	}
	m := &Member{cfg: cfg, id: newID(), started: cfg.Now().UTC(), js: js,
		subject: "weir.cluster." + cfg.Name + ".log", stop: make(chan struct{}), done: make(chan struct{})}
	m.log = cfg.Logger.With("cluster", cfg.Name, "member", m.id)
	m.records, m.recordsReady = map[string]seenRecord{}, make(chan struct{})
	m.status.Role = RoleFollower
	m.kv, err = retryJS(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "WEIR_CLUSTER_" + cfg.Name,
			Description: "weir cluster " + cfg.Name + ": members and the leader's lease", History: 1,
			TTL: memberRecordAge, Storage: jetstream.FileStorage, Replicas: cfg.Replicas})
	})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: opening its bucket (%d replicas): %w", cfg.Name, cfg.Replicas, err)
	}
	m.stream, err = retryJS(ctx, func(ctx context.Context) (jetstream.Stream, error) {
		return js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "WEIR_CLUSTER_LOG_" + cfg.Name,
			Description: "weir cluster " + cfg.Name + ": the registry's replicated log", Subjects: []string{m.subject},
			Storage: jetstream.FileStorage, Replicas: cfg.Replicas, Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardNew})
	})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: opening its log (%d replicas): %w", cfg.Name, cfg.Replicas, err)
	}
	m.obs, err = retryJS(ctx, func(ctx context.Context) (jetstream.ObjectStore, error) {
		return js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "WEIR_CLUSTER_BASE_" + cfg.Name,
			Description: "weir cluster " + cfg.Name + ": the log's base image", Storage: jetstream.FileStorage, Replicas: cfg.Replicas})
	})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: opening its object store (%d replicas): %w", cfg.Name, cfg.Replicas, err)
	}
	if err := m.writeRecord(ctx); err != nil {
		return nil, err
	}
	if err := m.watchMembers(ctx); err != nil {
		return nil, err
	}
	go m.heartbeat()
	m.log.Info("joined the cluster", "address", cfg.Address, "replicas", cfg.Replicas)
	return m, nil
}

// jsAttempt bounds one JetStream API request of Join; retryJS sends it
// again after that while the caller's context lasts.
const jsAttempt = 5 * time.Second

// retryJS runs op, a JetStream API request, with a deadline of jsAttempt
// per attempt, again after a short pause while ctx lasts when it went
// unanswered or the cluster said JetStream is not available: a request
// sent while the NATS cluster elects its meta leader (a server of it
// restarting) can go unanswered, and the next one is answered. Any other
// error is returned at once.
func retryJS[T any](ctx context.Context, op func(context.Context) (T, error)) (T, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, jsAttempt)
		v, err := op(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !jsUnavailable(err) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// jsUnavailable reports whether err says a JetStream request went
// unanswered or JetStream is unavailable for now (503), which a retry can
// get past.
func jsUnavailable(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) ||
		errors.As(err, &apiErr) && apiErr.Code == 503
}

// ID returns the member's ID, new at every start.
func (m *Member) ID() string { return m.id }

// SetStatus replaces what the member says of itself; the next heartbeat
// writes it.
func (m *Member) SetStatus(st MemberStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.status = st
}

func (m *Member) statusNow() MemberStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.status
}

func (m *Member) writeRecord(ctx context.Context) error {
	rec := memberRecord{ID: m.id, Address: m.cfg.Address, StartTime: m.started, TTLMillis: m.cfg.LeaseTTL.Milliseconds(),
		Settings: m.cfg.Settings, MemberStatus: m.statusNow()}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := m.kv.Put(ctx, "member."+m.id, b); err != nil {
		return fmt.Errorf("cluster %s: writing member %s's record: %w", m.cfg.Name, m.id, err)
	}
	return nil
}

// heartbeat rewrites the member's record every quarter lease until Leave.
func (m *Member) heartbeat() {
	defer close(m.done)
	t := time.NewTicker(m.cfg.LeaseTTL / 4)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.LeaseTTL)
		if err := m.writeRecord(ctx); err != nil {
			m.log.Warn("could not refresh the member's record", "error", err)
		}
		cancel()
	}
}

// watchMembers keeps m.records up to date from the bucket, until Leave:
// Members answers from memory, without a listing of the bucket per call.
func (m *Member) watchMembers(ctx context.Context) error {
	// The watch lives until Leave, not as long as Join's context.
	w, err := m.kv.Watch(context.WithoutCancel(ctx), "member.*")
	if err != nil {
		return fmt.Errorf("cluster %s: watching the members' records: %w", m.cfg.Name, err)
	}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-m.stop:
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				m.mu.Lock()
				switch {
				case e == nil: // the records there were at the start are in
					if m.recordsReady != nil {
						close(m.recordsReady)
						m.recordsReady = nil
					}
				case e.Operation() == jetstream.KeyValuePut:
					var rec memberRecord
					if json.Unmarshal(e.Value(), &rec) == nil {
						m.records[e.Key()] = seenRecord{rec: rec, at: e.Created()}
					}
				default: // deleted or purged
					delete(m.records, e.Key())
				}
				m.mu.Unlock()
			}
		}
	}()
	return nil
}

// seenRecord is a member's record as the watch last delivered it.
type seenRecord struct {
	rec memberRecord
	at  time.Time // when the member wrote it
}

// Members lists the cluster's members, the leader first, then by start.
// Records older than the bucket keeps them (a member that died without
// leaving) are left out.
func (m *Member) Members(ctx context.Context) ([]MemberInfo, error) {
	m.mu.Lock()
	ready := m.recordsReady
	m.mu.Unlock()
	if ready != nil {
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	lease, _, err := m.readLease(ctx)
	if err != nil {
		return nil, err
	}
	now := m.cfg.Now()
	var out []MemberInfo
	m.mu.Lock()
	var leading map[string]string // the leader's settings
	if lease != nil {
		if r, ok := m.records["member."+lease.Member]; ok {
			leading = r.rec.Settings
		}
	}
	for _, r := range m.records {
		if now.Sub(r.at) > memberRecordAge {
			continue
		}
		rec := r.rec
		info := MemberInfo{ID: rec.ID, Address: rec.Address, StartTime: rec.StartTime, LastSeen: r.at.UTC(), MemberStatus: rec.MemberStatus}
		info.Leader = lease != nil && lease.Member == rec.ID
		// A member rewrites its record every quarter of its own lease.
		ttl := m.cfg.LeaseTTL
		if rec.TTLMillis > 0 {
			ttl = time.Duration(rec.TTLMillis) * time.Millisecond
		}
		info.Up = now.Sub(r.at) < 3*ttl/4+ttl
		if !info.Leader && info.Role == RoleLeader {
			info.Role = RoleFollower // the lease says otherwise: its record is stale
		}
		if !info.Leader && leading != nil && rec.Settings != nil {
			info.SettingsDiffer = settingsDiffer(leading, rec.Settings)
		}
		out = append(out, info)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Leader != out[j].Leader {
			return out[i].Leader
		}
		return out[i].StartTime.Before(out[j].StartTime)
	})
	return out, nil
}

// settingsDiffer returns the names of the settings whose values in a and
// b differ (one of them without the setting included), sorted.
func settingsDiffer(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Leave removes the member's record and, when it leads, resigns (its
// renewals stop) and gives the lease up, so the others need not wait for
// it to expire. The member must not write through its leadership
// afterwards.
func (m *Member) Leave(ctx context.Context) error {
	select {
	case <-m.stop:
		return nil
	default:
	}
	close(m.stop)
	<-m.done
	m.mu.Lock()
	l := m.leading
	m.mu.Unlock()
	var errs []error
	// A leadership lost before (taken over, or not renewed in time) has
	// no lease to give up: it is another's, or expires by itself. One the
	// member resigned has.
	if l != nil && (l.Err() == nil || l.resigned.Load()) {
		// Renewals stop first, so the revision below is the lease's last
		// unless another member took the lease meanwhile: then the delete
		// is refused, and there is nothing of this member's to give up.
		l.Resign() // idempotent; takes no lock of the member's
		// The next leader's term follows this one although the lease goes.
		if _, err := m.kv.Put(ctx, termKey, []byte(strconv.FormatUint(l.Term(), 10))); err != nil {
			errs = append(errs, fmt.Errorf("recording the term: %w", err))
		}
		if err := m.kv.Delete(ctx, leaseKey, jetstream.LastRevision(l.rev.Load())); err != nil && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !wrongSequence(err) {
			errs = append(errs, fmt.Errorf("giving the lease up: %w", err))
		}
	}
	if err := m.kv.Delete(ctx, "member."+m.id); err != nil {
		errs = append(errs, fmt.Errorf("removing the member's record: %w", err))
	}
	m.log.Info("left the cluster")
	return errors.Join(errs...)
}

func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
