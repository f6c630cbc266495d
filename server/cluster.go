package server

// A process started with Config.Cluster is one member of a weir cluster
// (package cluster). Every member serves the API, the console and the
// Pub/Sub APIs on its own address:
//
//   - the leader (the member holding the lease) runs the job service, and
//     its state store writes every batch to the cluster's log first;
//   - a follower keeps a replica of that store by applying the log, and
//     forwards every API request to the leader (its address is in the
//     lease), answering 503 NO_CLUSTER_LEADER while nobody leads;
//   - when the leader is lost, a follower takes the lease over, brings its
//     replica to the log's end, fences the log and opens the job service
//     on it: the jobs resume from their last checkpoints, as after a
//     restart of a single server;
//   - a leader that loses the lease (it was cut off from NATS, or paused
//     longer than the lease) can write nothing more: it stops its jobs,
//     reopens its store as a replica and follows the cluster again, in
//     the same process; only when that fails does the process stop (Wait
//     returns StopFailed) so that a supervisor restarts it.
//
// GET /v1/cluster/members is answered by every member itself.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-dev/weir/api"
	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/cluster"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service"
	"github.com/weir-dev/weir/state"
)

// ErrClusterConfig: the cluster options cannot work.
var ErrClusterConfig = errors.New("invalid cluster options")

// clusterMember is the process's membership of a cluster.
type clusterMember struct {
	p *Process
	m *cluster.Member

	// mu guards follower, lead, api and apiEnd; a leaf (never held while
	// calling out of this file).
	mu       sync.Mutex
	follower *state.Store // the replica, open while following
	lead     *cluster.Leadership
	api      http.Handler // the leader's own API, once it leads
	apiEnd   func()
	apiFor   func(*service.Service) (http.Handler, func())

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns
	fail   chan error    // capacity 1: why the member stops
	lost   atomic.Bool   // the leadership was lost
	begun  atomic.Bool   // run was started
	proxy  *httputil.ReverseProxy
}

type proxyTarget struct{}

// joinCluster joins Config.Cluster and opens the data directory's store
// as a replica; run (started by Serve) campaigns.
func (p *Process) joinCluster(ctx context.Context) (*clusterMember, error) {
	cfg := p.cfg
	if cfg.NATSURL == "" {
		return nil, fmt.Errorf("%w: --cluster needs --nats-url: the members meet on a NATS JetStream server or cluster", ErrClusterConfig)
	}
	if cfg.Kind != KindServer {
		return nil, fmt.Errorf("%w: only `weir server` joins a cluster", ErrClusterConfig)
	}
	adv := cfg.AdvertiseURL
	if adv == "" {
		host, _, _ := net.SplitHostPort(p.ln.Addr().String())
		if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			return nil, fmt.Errorf("%w: listening on %s, the other members cannot tell this member's address: give it with --advertise-url", ErrClusterConfig, p.ln.Addr())
		}
		adv = p.Address()
	} else if u, err := url.Parse(adv); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: --advertise-url %q: want http://host:port or https://host:port", ErrClusterConfig, adv)
	}
	transport, err := forwardTransport(cfg.ClusterTLSCA, p.log)
	if err != nil {
		return nil, err
	}
	// The log and the bucket keep as many replicas as the broker's topics
	// (pubsub.ReplicasAuto or --cluster-replicas, decided once).
	m, err := cluster.Join(ctx, cluster.Config{Name: cfg.Cluster, Conn: p.broker.Conn(), Address: adv,
		Replicas: p.broker.Replicas(), LeaseTTL: cfg.ClusterLeaseTTL, BaseEvery: cfg.ClusterBaseEvery, Logger: p.log,
		Settings: jobSettings(cfg)})
	if err != nil {
		return nil, err
	}
	replica, err := state.Open(filepath.Join(p.dir, "state"), p.log)
	if err == nil {
		err = checkReplica(replica, p.dir)
		if err != nil {
			_ = replica.Close()
		}
	}
	if err != nil {
		_ = m.Leave(context.WithoutCancel(ctx))
		return nil, err
	}
	cm := &clusterMember{p: p, m: m, follower: replica, done: make(chan struct{}), fail: make(chan error, 1)}
	cm.ctx, cm.cancel = context.WithCancel(context.WithoutCancel(ctx))
	cm.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(pr.In.Context().Value(proxyTarget{}).(*url.URL))
			pr.Out.Host = pr.In.Host // the leader checks Host and Origin as this member would
			pr.SetXForwarded()
			// The leader's per-address limits count the client, not this
			// member (the address proven with the token).
			if p.guard != nil {
				p.guard.MarkForwarded(pr.In, pr.Out)
			}
		},
		Transport:     transport,
		FlushInterval: -1, // event streams
		// This member's guard let the request through (its token, or none
		// needed): a leader that refuses it as unauthenticated holds other
		// tokens. Say so, instead of its "wrong bearer token", which
		// sends the user to check a token this member accepted.
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode != http.StatusUnauthorized {
				return nil
			}
			target := resp.Request.URL.Scheme + "://" + resp.Request.URL.Host
			msg := fmt.Sprintf("member %s let this request through, but the cluster's leader at %s refused its token: the members do not hold the same tokens. Give every member the same --auth-token-file (a member started with --generate-auth-token generates its own: copy one member's DATA_DIR/auth-token to the others' data directories, then restart them)",
				m.ID(), target)
			b, _ := json.Marshal(api.ErrorBody{Error: api.ErrorDetail{Code: errcode.Unauthenticated, Message: msg}})
			b = append(b, '\n')
			_ = resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(b))
			resp.ContentLength = int64(len(b))
			resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
			resp.Header.Set("Content-Type", "application/json")
			resp.Header.Del("Content-Encoding")
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var cv *tls.CertificateVerificationError
			if errors.As(err, &cv) {
				writeAPIError(w, errcode.NoClusterLeader, fmt.Sprintf("member %s cannot forward to the cluster's leader at %s: it does not trust the leader's certificate (%v); start the members with --cluster-tls-ca naming the CA that signed their --tls-cert",
					m.ID(), r.Context().Value(proxyTarget{}), err))
				return
			}
			writeAPIError(w, errcode.NoClusterLeader, fmt.Sprintf("the cluster's leader at %s does not answer (%v); a member takes over within the lease: retry in a few seconds", r.Context().Value(proxyTarget{}), err))
		},
	}
	return cm, nil
}

// jobSettings returns the member's settings that decide how the jobs it
// leads run, by flag name: a member that takes over runs every job with
// its own, so the members list names those that differ from the
// leader's (the same flags on every member give the same jobs).
func jobSettings(cfg Config) map[string]string {
	orDefault := func(v string) string {
		if v == "" || v == "0s" {
			return "default"
		}
		return v
	}
	// The same roots and hosts in another order are the same setting.
	set := func(vs []string) string { return strings.Join(slices.Sorted(slices.Values(vs)), ",") }
	return map[string]string{
		"checkpoint-interval":      orDefault(cfg.CheckpointInterval.String()),
		"idle-checkpoint-interval": orDefault(cfg.IdleCheckpointInterval.String()),
		"max-sink-buffer":          orDefault(sinkBuffer(cfg.MaxSinkBuffer)),
		"min-replace-interval":     orDefault(cfg.MinReplaceInterval.String()),
		"rollback-retention":       orDefault(cfg.RollbackRetention.String()),
		"file-roots":               orDefault(set(cfg.FileRoots)),
		"allowed-sql-hosts":        orDefault(set(cfg.AllowedSQLHosts)),
		"pubsub-project":           orDefault(cfg.PubSubProject),
	}
}

// checkReplica refuses a data directory that holds a store written
// outside a cluster (a single server's): the cluster's log would be
// applied on top of records it does not know.
func checkReplica(st *state.Store, dir string) error {
	seq, err := st.ReplicatedSeq()
	if err != nil || seq > 0 {
		return err
	}
	empty, err := st.Empty()
	if err != nil {
		return err
	}
	if !empty {
		return fmt.Errorf("%w: the data directory %s holds a single server's records; a cluster member needs a new data directory (move jobs with weir snapshots export and import)", ErrClusterConfig, dir)
	}
	return nil
}

// handler is the member's API: the members list, the leader's own API
// once this member leads, the leader's through a forward until then.
func (cm *clusterMember) handler(apiFor func(*service.Service) (http.Handler, func())) http.Handler {
	cm.apiFor = apiFor
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/cluster/members" {
			cm.serveMembers(w, r)
			return
		}
		cm.mu.Lock()
		h := cm.api
		cm.mu.Unlock()
		if h != nil {
			h.ServeHTTP(w, r)
			return
		}
		lease, err := cm.m.Leader(r.Context())
		if err != nil || lease == nil || lease.Member == cm.m.ID() {
			msg := "no member of the cluster leads yet (the lease is being taken over): retry in a few seconds"
			if err != nil {
				msg = fmt.Sprintf("the cluster's lease cannot be read (%v): retry in a few seconds", err)
			}
			writeAPIError(w, errcode.NoClusterLeader, msg)
			return
		}
		target, err := url.Parse(lease.Address)
		if err != nil {
			writeAPIError(w, errcode.NoClusterLeader, fmt.Sprintf("the leader's address %q is not a URL", lease.Address))
			return
		}
		cm.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), proxyTarget{}, target)))
	})
}

func (cm *clusterMember) serveMembers(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeAPIError(w, errcode.MethodNotAllowed, "GET /v1/cluster/members only")
		return
	}
	ms, err := cm.m.Members(r.Context())
	if err != nil {
		writeAPIError(w, errcode.NoClusterLeader, err.Error())
		return
	}
	out := client.ClusterMembers{Cluster: cm.p.cfg.Cluster, Answered: cm.m.ID(), Members: []client.ClusterMember{}}
	for _, m := range ms {
		out.Members = append(out.Members, client.ClusterMember{ID: m.ID, Address: m.Address, Role: m.Role, Leader: m.Leader,
			StartTime: m.StartTime, LastSeen: m.LastSeen, Up: m.Up, LogSequence: m.LogSequence, Jobs: m.Jobs, SettingsDiffer: m.SettingsDiffer})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// start campaigns in the background (Serve calls it once serving).
func (cm *clusterMember) start() {
	cm.begun.Store(true)
	go cm.run()
	go cm.warnSettings()
}

// warnSettings logs a warning, once the members' records name a leader
// other than this member, when this member's job settings differ from
// the leader's (weir cluster members shows them too). It gives up after
// a minute without a leader, or when the member stops.
func (cm *clusterMember) warnSettings() {
	ctx, cancel := context.WithTimeout(cm.ctx, time.Minute)
	defer cancel()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		ms, err := cm.m.Members(ctx)
		var self *cluster.MemberInfo
		led := false // a leader's record is known
		for i := range ms {
			if ms[i].ID == cm.m.ID() {
				self = &ms[i]
			}
			led = led || ms[i].Leader
		}
		switch {
		case err != nil:
		case self != nil && self.Leader:
			return
		case self != nil && len(self.SettingsDiffer) > 0:
			cm.p.log.Warn("this member's job settings differ from the leader's: were it to take over, it would run every job with its own; give every member the same flags",
				"settings", strings.Join(self.SettingsDiffer, ","))
			return
		case led:
			return // the leader's settings are known and the same
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// run campaigns, leads until the leadership is lost, then steps down and
// campaigns again as a follower, until the process stops.
func (cm *clusterMember) run() {
	defer close(cm.done)
	for cm.ctx.Err() == nil {
		svc, l, ok := cm.campaign()
		if !ok || !cm.leadUntilLost(svc, l) {
			return
		}
		if err := cm.stepDown(svc, l); err != nil {
			cm.stop(fmt.Errorf("cluster %s: %w; stepping down failed (%w), so this member stops: restart it and it joins as a follower", cm.p.cfg.Cluster, l.Err(), err))
			return
		}
	}
}

// campaign follows the cluster's log until this member holds the lease,
// then opens the job service on the replica; ok is false when the member
// stops (cm.stop was called, or the process is stopping).
func (cm *clusterMember) campaign() (*service.Service, *cluster.Leadership, bool) {
	cm.mu.Lock()
	replica := cm.follower
	cm.mu.Unlock()
	l, err := cm.m.Campaign(cm.ctx, replica)
	for errors.Is(err, cluster.ErrReplicaBehind) && cm.ctx.Err() == nil {
		cm.p.log.Info("the replica is older than the cluster's log: restoring the base image", "reason", err.Error())
		restored, rerr := cm.restoreBase(replica)
		if rerr == nil {
			replica = restored
			l, err = cm.m.Campaign(cm.ctx, replica)
			continue
		}
		if restored == nil {
			err = rerr // the old replica could not be opened again either
			break
		}
		// The old replica is back in place (a NATS timeout while the base
		// image was read, after a partition healed): ask again, later.
		replica = restored
		cm.p.log.Warn(fmt.Sprintf("restoring the base image failed: retrying in %s", baseRestoreRetry), "error", rerr.Error())
		t := time.NewTimer(baseRestoreRetry)
		select {
		case <-cm.ctx.Done():
			t.Stop()
		case <-t.C:
		}
		if cm.ctx.Err() == nil {
			l, err = cm.m.Campaign(cm.ctx, replica)
		}
	}
	if err != nil {
		if cm.ctx.Err() == nil {
			cm.stop(fmt.Errorf("cluster %s: %w", cm.p.cfg.Cluster, err))
		}
		return nil, nil, false
	}
	cm.mu.Lock()
	cm.follower = nil
	cm.mu.Unlock()
	if err := replica.Close(); err != nil {
		l.Resign()
		cm.stop(fmt.Errorf("cluster %s: closing the replica before leading: %w", cm.p.cfg.Cluster, err))
		return nil, nil, false
	}
	began := time.Now()
	svc, err := cm.p.openService(cm.ctx, l)
	if err != nil {
		l.Resign()
		cm.stop(err)
		return nil, nil, false
	}
	cm.p.svcMu.Lock()
	cm.p.svc = svc
	cm.p.svcMu.Unlock()
	h, end := cm.apiFor(svc)
	cm.mu.Lock()
	cm.api, cm.apiEnd, cm.lead = h, end, l
	cm.mu.Unlock()
	cm.lost.Store(false)
	cm.p.log.Info("this member leads the cluster and runs its jobs", "term", l.Term(), "service_open", time.Since(began).Round(time.Millisecond).String())
	return svc, l, true
}

// leadUntilLost reports the leader's jobs until the leadership is lost
// (true) or the process stops (false).
func (cm *clusterMember) leadUntilLost(svc *service.Service, l *cluster.Leadership) bool {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		cm.reportJobs(svc, l)
		select {
		case <-l.Lost():
			cm.lost.Store(true)
			return true
		case <-cm.ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// stepDown turns a leader that lost the lease into a follower without a
// restart: the API forwards again, the job service stops its jobs (their
// checkpoints, and so the commits and acknowledgements that follow them,
// are refused since the leadership is lost: the next leader resumes them
// from the last checkpoint the log holds), and the store is opened again
// as the replica the next campaign brings to the log's end. The writes
// the log refused were not committed locally either, so the replica holds
// a prefix of the log.
func (cm *clusterMember) stepDown(svc *service.Service, l *cluster.Leadership) error {
	cm.p.log.Warn("this member no longer leads: it stops its jobs without committing and follows the cluster again", "term", l.Term(), "reason", l.Err())
	l.Resign()
	cm.mu.Lock()
	end := cm.apiEnd
	cm.api, cm.apiEnd, cm.lead = nil, nil, nil
	cm.mu.Unlock()
	if end != nil {
		end()
	}
	cm.p.svcMu.Lock()
	cm.p.svc = nil
	cm.p.svcMu.Unlock()
	// The jobs stop once their calls to NATS return: a member cut off
	// from NATS waits out the client's timeouts (seconds each, longer on
	// a loaded machine). Nothing is at risk meanwhile (the log refuses
	// this member's writes and the API forwards), so the wait is the
	// shutdown's bound, not a request's: with a request's 10 s a slow
	// stop made the member exit instead of following.
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(cm.ctx), DefaultShutdownTimeout)
	err := svc.Close(ctx)
	cancel()
	if err != nil {
		return fmt.Errorf("stopping the job service: %w", err)
	}
	if took := time.Since(began); took > httpShutdownTimeout {
		cm.p.log.Warn("the jobs took long to stop after the leadership was lost", "took", took.Round(time.Millisecond).String())
	}
	replica, err := state.Open(filepath.Join(cm.p.dir, "state"), cm.p.log)
	if err != nil {
		return fmt.Errorf("opening the store as a replica: %w", err)
	}
	cm.mu.Lock()
	cm.follower = replica
	cm.mu.Unlock()
	cm.p.log.Info("this member follows the cluster again")
	return nil
}

// baseRestoreRetry is how long a member waits before it asks again for
// a base image it could not read.
const baseRestoreRetry = 2 * time.Second

// restoreBase replaces the data directory's store by the cluster's base
// image: the old one is closed and moved aside (removed once the base
// image is in place), and the new one opened as the replica. When the
// base image cannot be read, the old replica is put back and opened again
// and returned with the error (nil when that failed too).
func (cm *clusterMember) restoreBase(old *state.Store) (*state.Store, error) {
	dir := filepath.Join(cm.p.dir, "state")
	aside := dir + ".replaced"
	cm.mu.Lock()
	cm.follower = nil
	cm.mu.Unlock()
	if err := old.Close(); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(aside); err != nil {
		return nil, err
	}
	if err := os.Rename(dir, aside); err != nil {
		return nil, fmt.Errorf("moving the old replica aside: %w", err)
	}
	if _, err := cm.m.RestoreBase(cm.ctx, dir); err != nil {
		_ = os.RemoveAll(dir)
		if rerr := os.Rename(aside, dir); rerr != nil {
			return nil, errors.Join(err, rerr)
		}
		// The old replica is back: open it again, so that the caller can
		// follow the log and try again.
		replica, oerr := state.Open(dir, cm.p.log)
		if oerr != nil {
			return nil, errors.Join(err, oerr)
		}
		cm.mu.Lock()
		cm.follower = replica
		cm.mu.Unlock()
		return replica, err
	}
	if err := os.RemoveAll(aside); err != nil {
		cm.p.log.Warn("could not remove the replaced replica", "dir", aside, "error", err)
	}
	replica, err := state.Open(dir, cm.p.log)
	if err != nil {
		return nil, err
	}
	cm.mu.Lock()
	cm.follower = replica
	cm.mu.Unlock()
	return replica, nil
}

// reportJobs puts the names of the jobs the leader runs in its record.
func (cm *clusterMember) reportJobs(svc *service.Service, l *cluster.Leadership) {
	jobs, err := svc.List(service.StatusActive)
	if err != nil {
		return
	}
	var names []string
	for _, j := range jobs {
		names = append(names, j.Name)
	}
	sort.Strings(names)
	l.SetJobs(names)
}

func (cm *clusterMember) stop(err error) {
	select {
	case cm.fail <- err:
	default:
	}
}

// failed is closed-over by Wait: an error when the member must stop; a
// nil member's never delivers.
func (cm *clusterMember) failed() <-chan error {
	if cm == nil {
		return nil
	}
	return cm.fail
}

func (cm *clusterMember) lostLeadership() bool { return cm != nil && cm.lost.Load() }

// stopRunning ends the campaign or the leadership's loop, and closes the
// replica when the member still follows.
func (cm *clusterMember) stopRunning() {
	cm.cancel()
	if cm.begun.Load() {
		select {
		case <-cm.done:
		case <-time.After(httpShutdownTimeout):
			cm.p.log.Warn("the cluster member's campaign did not stop in time")
		}
	}
	cm.mu.Lock()
	replica := cm.follower
	cm.follower = nil
	cm.mu.Unlock()
	if replica != nil {
		_ = replica.Close()
	}
}

// leave gives the lease up (after the service's last checkpoints) and
// removes the member's record.
func (cm *clusterMember) leave(ctx context.Context) error {
	cm.mu.Lock()
	l := cm.lead
	cm.mu.Unlock()
	if l != nil {
		l.Resign()
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpShutdownTimeout)
	defer cancel()
	if err := cm.m.Leave(lctx); err != nil {
		return fmt.Errorf("leaving cluster %s: %w", cm.p.cfg.Cluster, err)
	}
	return nil
}

// endStreams ends the leader's API's event streams.
func (cm *clusterMember) endStreams() {
	cm.mu.Lock()
	end := cm.apiEnd
	cm.mu.Unlock()
	if end != nil {
		end()
	}
}

// notClustered answers GET /v1/cluster/members of a server outside a
// cluster: NOT_FOUND, saying how to start one.
func notClustered(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/cluster/members" {
			writeAPIError(w, errcode.NotFound, "this server is not a member of a cluster (start members with weir server --cluster NAME --nats-url URL[,URL...])")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// writeAPIError writes the API's error body with code's status.
func writeAPIError(w http.ResponseWriter, code errcode.Code, msg string) {
	b, _ := json.Marshal(api.ErrorBody{Error: api.ErrorDetail{Code: code, Message: msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code.Status())
	_, _ = w.Write(append(b, '\n'))
}

// clusterCollector exports the cluster's view of a member for GET
// /metrics (the leader's: followers forward /metrics to it).
type clusterCollector struct {
	cm                   *clusterMember
	members, seq, leader *prometheus.Desc
}

func newClusterCollector(cm *clusterMember) *clusterCollector {
	return &clusterCollector{cm: cm,
		members: prometheus.NewDesc("weir_cluster_members", "Members of the cluster whose record is fresh (up).", []string{"cluster"}, nil),
		seq: prometheus.NewDesc("weir_cluster_member_log_sequence", "The last entry of the cluster's log each member's store holds.",
			[]string{"cluster", "member", "role"}, nil),
		leader: prometheus.NewDesc("weir_cluster_leader_term", "The leader's term: it grows by one at each takeover.", []string{"cluster", "member"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.members
	ch <- c.seq
	ch <- c.leader
}

// Collect implements prometheus.Collector.
func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	name := c.cm.p.cfg.Cluster
	ms, err := c.cm.m.Members(ctx)
	if err != nil {
		return
	}
	up := 0
	for _, m := range ms {
		if !m.Up {
			continue
		}
		up++
		ch <- prometheus.MustNewConstMetric(c.seq, prometheus.GaugeValue, float64(m.LogSequence), name, m.ID, m.Role)
	}
	ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(up), name)
	if l, err := c.cm.m.Leader(ctx); err == nil && l != nil {
		ch <- prometheus.MustNewConstMetric(c.leader, prometheus.GaugeValue, float64(l.Term), name, l.Member)
	}
}

// sinkBuffer is Config.MaxSinkBuffer as a setting ("" for the default).
func sinkBuffer(n int64) string {
	if n <= 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}
