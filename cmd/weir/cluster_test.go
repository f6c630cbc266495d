package main

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/internal/natscluster"
	"github.com/weir-dev/weir/internal/testpki"
)

// startMember starts `weir server --cluster` on dataDir over the NATS
// cluster at urls, with a 2s lease.
func startMember(t *testing.T, dataDir, urls string) *serverProc {
	t.Helper()
	// Base images every 32 KiB: the log is cut during the test, so a
	// member that comes back after a kill restores one.
	return startServerArgs(t, dataDir, "--cluster", "c1", "--nats-url", urls, "--cluster-lease", "2s", "--cluster-base-every", "32768")
}

// members returns `weir cluster members` answered by p; ok is false when
// p does not answer.
func (p *serverProc) members() (client.ClusterMembers, bool) {
	p.t.Helper()
	var cm client.ClusterMembers
	r := p.cli("", "cluster", "members", "--format", "json")
	if r.code != ExitOK {
		return cm, false
	}
	if err := json.Unmarshal([]byte(r.stdout), &cm); err != nil {
		p.t.Fatalf("cluster members: %v\n%s", err, r.stdout)
	}
	return cm, true
}

// leaderOf waits until p reports a leader among want members that are up,
// and returns the leader's address.
func leaderOf(t *testing.T, p *serverProc, want int) string {
	t.Helper()
	var cm client.ClusterMembers
	if !await.Until(60*time.Second, 100*time.Millisecond, func() bool {
		var ok bool
		cm, ok = p.members()
		up := 0
		for _, m := range cm.Members {
			if m.Up {
				up++
			}
		}
		return ok && up == want && len(cm.Members) > 0 && cm.Members[0].Leader
	}) {
		t.Fatalf("no leader among %d members: %+v\nlog:\n%s", want, cm, p.log())
	}
	return cm.Members[0].Address
}

// cliRetry runs the CLI against p until it exits 0 (a member answers 503
// NO_CLUSTER_LEADER while the lease is taken over), or fails the test.
func (p *serverProc) cliRetry(t *testing.T, dir string, args ...string) cliResult {
	t.Helper()
	var r cliResult
	if !await.Until(60*time.Second, 100*time.Millisecond, func() bool { r = p.cli(dir, args...); return r.code == ExitOK }) {
		t.Fatalf("weir %s: exit %d: %s\nlog:\n%s", strings.Join(args, " "), r.code, r.stderr, p.log())
	}
	return r
}

// TestCLIClusterFailover runs two `weir server --cluster` members over a
// three-server NATS cluster (in the test's process) and a windowed job
// reading a topic into a SQLite table. Every request goes to the
// follower, which forwards it to the leader. The leader is killed with
// SIGKILL mid-stream: the follower takes over (the job resumes from its
// last checkpoint on the replica the follower kept), the killed member
// comes back as a follower, one NATS server of three is stopped, and the
// leader is killed once more. The drained table holds exactly what was
// published: nothing lost, nothing counted twice.
func TestCLIClusterFailover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts servers")
	}
	nc := natscluster.Start(t, 3, 0)
	work := t.TempDir()
	dirs := []string{t.TempDir(), t.TempDir()}
	db := filepath.Join(work, "totals.db")
	pipeline := writeTestFile(t, work, "p.yaml", totalsPipeline("topic: orders", "", "", "", db))
	in := newCrashInput(t, work, 7)
	chunk := func(from, to int) string { return in.chunk(from, to, time.Duration(from)*100*time.Millisecond) }
	rng := rand.New(rand.NewPCG(5, 8))

	procs := []*serverProc{startMember(t, dirs[0], nc.URLs())}
	leaderOf(t, procs[0], 1) // the first member leads
	procs = append(procs, startMember(t, dirs[1], nc.URLs()))
	if addr := leaderOf(t, procs[1], 2); addr != procs[0].url {
		t.Fatalf("leader %s, want the first member %s", addr, procs[0].url)
	}
	leader, follower := 0, 1
	// /metrics through the follower: the leader's, with the cluster's view.
	if !await.Until(10*time.Second, 100*time.Millisecond, func() bool {
		body := httpGet(t, procs[1].url+"/metrics")
		return strings.Contains(body, `weir_cluster_members{cluster="c1"} 2`) &&
			strings.Contains(body, `weir_cluster_leader_term{cluster="c1",member=`) &&
			strings.Contains(body, `weir_cluster_member_log_sequence{cluster="c1",member=`) && strings.Contains(body, `role="follower"} `)
	}) {
		t.Fatalf("/metrics through the follower lacks the cluster's metrics:\n%s", httpGet(t, procs[1].url+"/metrics"))
	}
	if r := procs[1].cli("", "cluster", "members"); r.code != ExitOK || !strings.Contains(r.stdout, "Cluster c1 (answered by member") ||
		!strings.Contains(r.stdout, "BEHIND") || !strings.Contains(r.stdout, procs[0].url) || !strings.Contains(r.stdout, procs[1].url) ||
		!strings.Contains(r.stdout, "none (replica)") {
		t.Fatalf("cluster members: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Through the follower: forwarded to the leader.
	id := procs[follower].runOrdersJob(t, work, pipeline)
	if j := procs[follower].describe(id); j["delivery"] != "exactly_once" {
		t.Fatalf("delivery %v", j["delivery"])
	}
	procs[follower].cliRetry(t, work, "topics", "publish", "orders", "--file", chunk(0, 1500), "--id-field", "id")

	bounds := []int{1500, 3000, 4500, 6000}
	for round := 0; round < 2; round++ {
		procs[leader].waitJob(id, "checkpoints", epochAtLeast(epochOf(procs[leader].describe(id))+2))
		<-time.After(time.Duration(50+rng.IntN(500)) * time.Millisecond) // a kill wherever it lands
		killed := time.Now()
		if code := procs[leader].stop(syscall.SIGKILL); code != 128+int(syscall.SIGKILL) {
			t.Fatalf("kill -9 of the leader: exit %d", code)
		}
		// The survivor takes over; publishing through it waits for that.
		procs[follower].cliRetry(t, work, "topics", "publish", "orders", "--file", chunk(bounds[round], bounds[round+1]), "--id-field", "id")
		if addr := leaderOf(t, procs[follower], 1); addr != procs[follower].url {
			t.Fatalf("after the kill the leader is %s, want the survivor %s", addr, procs[follower].url)
		}
		procs[follower].waitJob(id, "RUNNING on the new leader", stateIs("RUNNING"))
		t.Logf("round %d: the job runs on the new leader %s after the kill", round, time.Since(killed).Round(time.Millisecond))
		// The killed member comes back, with its data directory, as a
		// follower that catches up from the log.
		procs[leader] = startMember(t, dirs[leader], nc.URLs())
		leaderOf(t, procs[leader], 2)
		leader, follower = follower, leader
		if round == 0 {
			nc.StopServer(2) // one NATS server of three: nothing a user sees
		}
	}
	procs[follower].cliRetry(t, work, "topics", "publish", "orders", "--file", chunk(4500, 6000), "--id-field", "id")
	waitCaughtUp(t, procs[leader], id)
	drainAndCheckTotals(t, procs[follower], work, id, db, in.want, in.wantN)

	// The follower's replica holds the drained job too: it answers the
	// same once it leads.
	procs[leader].stop(syscall.SIGTERM)
	if addr := leaderOf(t, procs[follower], 1); addr != procs[follower].url {
		t.Fatalf("after the leader left the leader is %s", addr)
	}
	if j := procs[follower].describe(id); j["state"] != "DRAINED" {
		t.Fatalf("on the new leader the job is %v", j["state"])
	}
	procs[follower].stop(syscall.SIGTERM)
	for i, p := range procs {
		t.Logf("member %d: %d base images stored, %d restored", i, strings.Count(p.log(), "stored a base image"), strings.Count(p.log(), "restored the base image"))
	}
}

// TestCLIClusterPartition cuts the leader off from NATS while its process
// keeps running (the only NATS server it knows stops): it stops writing
// within half a lease and steps down without exiting, the other member
// takes over, and the drained table holds exactly what was published —
// no split brain, nothing written twice. Back in touch, the old leader
// follows, forwards requests, and leads again when the other leaves.
func TestCLIClusterPartition(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts servers")
	}
	nc := natscluster.Start(t, 3, 0)
	work := t.TempDir()
	db := filepath.Join(work, "totals.db")
	pipeline := writeTestFile(t, work, "p.yaml", totalsPipeline("topic: orders", "", "", "", db))
	in := newCrashInput(t, work, 5)
	chunk := func(from, to int) string { return in.chunk(from, to, time.Duration(from)*100*time.Millisecond) }

	a := startMember(t, t.TempDir(), nc.URLs(0)) // knows only NATS server 0
	leaderOf(t, a, 1)
	b := startMember(t, t.TempDir(), nc.URLs(1, 2))
	if addr := leaderOf(t, b, 2); addr != a.url {
		t.Fatalf("leader %s, want %s", addr, a.url)
	}
	id := b.runOrdersJob(t, work, pipeline)
	b.cliRetry(t, work, "topics", "publish", "orders", "--file", chunk(0, 2000), "--id-field", "id")
	a.waitJob(id, "checkpoints", epochAtLeast(3))

	cut := time.Now()
	nc.StopServer(0)
	// The cut-off leader steps down and keeps running as a follower.
	if !await.Until(60*time.Second, 100*time.Millisecond, func() bool {
		return strings.Contains(a.log(), "this member follows the cluster again")
	}) {
		t.Fatalf("the cut-off leader did not step down\nlog:\n%s", a.log())
	}
	t.Logf("the cut-off leader stepped down %s after the cut", time.Since(cut).Round(time.Millisecond))
	if !strings.Contains(a.log(), "lost the cluster's leadership") {
		t.Fatalf("the cut-off leader's log does not say it lost the leadership:\n%s", a.log())
	}
	select {
	case err := <-a.done:
		t.Fatalf("the cut-off leader exited (%v) instead of stepping down\nlog:\n%s", err, a.log())
	default:
	}
	b.cliRetry(t, work, "topics", "publish", "orders", "--file", chunk(2000, 4000), "--id-field", "id")
	if addr := leaderOf(t, b, 1); addr != b.url {
		t.Fatalf("after the cut the leader is %s, want %s", addr, b.url)
	}
	if err := nc.StartServer(0); err != nil {
		t.Fatal(err)
	}
	// Back in touch, the old leader is a follower of b: it answers and
	// forwards, and its replica catches up. Its NATS server, just back,
	// may answer a read of the bucket from before the cut for a moment
	// (its replica catches up): the lease it reads names b within the
	// wait, not at the first read.
	var seen string
	if !await.Until(60*time.Second, 100*time.Millisecond, func() bool { seen = leaderOf(t, a, 2); return seen == b.url }) {
		t.Fatalf("the stepped-down member sees leader %s, want %s", seen, b.url)
	}
	waitCaughtUp(t, b, id)
	drainAndCheckTotals(t, a, work, id, db, in.want, in.wantN)
	// Its replica holds everything: when b leaves, it leads again and
	// answers from it.
	b.stop(syscall.SIGTERM)
	if addr := leaderOf(t, a, 1); addr != a.url {
		t.Fatalf("after b left the leader is %s, want %s", addr, a.url)
	}
	if j := a.describe(id); j["state"] != "DRAINED" {
		t.Fatalf("on the member that stepped down and leads again the job is %v", j["state"])
	}
	if code := a.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM: exit %d\nlog:\n%s", code, a.log())
	}
}

// TestCLIClusterRefusals: the cluster flags' usage errors, a single
// server's data directory refused as a member's, and `weir cluster
// members` against a server outside a cluster.
func TestCLIClusterRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	nc := natscluster.Start(t, 1, 0)
	dir := t.TempDir()
	single := startServer(t, dir)
	r := single.cli("", "cluster", "members")
	if r.code != ExitFailure || !strings.Contains(r.stderr, "NOT_FOUND") || !strings.Contains(r.stderr, "not a member of a cluster") {
		t.Errorf("cluster members outside a cluster: exit %d, %s", r.code, r.stderr)
	}
	// A record in the single server's registry: a batch job.
	single.mustCLI(t, t.TempDir(), "run", testdata(t, "totals.yaml"), "--job-name", "totals")
	single.waitJob("totals", "DONE", stateIs("DONE"))
	single.stop(syscall.SIGTERM)
	runCases(t, t.TempDir(), []cliCase{
		{name: "cluster flags without --cluster", args: []string{"server", "--data-dir", t.TempDir(), "--cluster-lease", "2s"},
			wantCode: ExitUsage, wantStderr: []string{"go with --cluster"}},
		{name: "--cluster without --nats-url", args: []string{"server", "--data-dir", t.TempDir(), "--cluster", "c1"},
			wantCode: ExitUsage, wantStderr: []string{"--cluster c1 needs --nats-url"}},
		{name: "a bad cluster name", args: []string{"server", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--cluster", "c.1", "--nats-url", nc.URLs()},
			wantCode: ExitUsage, wantStderr: []string{`cluster name "c.1"`}},
		{name: "a single server's data directory", args: []string{"server", "--data-dir", dir, "--listen", "127.0.0.1:0", "--cluster", "c1", "--nats-url", nc.URLs()},
			wantCode: ExitUsage, wantStderr: []string{"holds a single server's records", "needs a new data directory"}},
		{name: "an unspecified listen address without --advertise-url", args: []string{"server", "--data-dir", t.TempDir(), "--listen", "0.0.0.0:0", "--generate-auth-token", "--cluster", "c1", "--nats-url", nc.URLs()},
			wantCode: ExitUsage, wantStderr: []string{"--advertise-url"}},
	})
}

// TestCLIBenchFailover runs `weir bench failover` for one kill: the
// survivor takes over after about a lease and the job resumes after that.
func TestCLIBenchFailover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts servers")
	}
	r := runCLI(t, t.TempDir(), "bench", "failover", "--kills", "1", "--lease", "1s", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("bench failover: exit %d: %s", r.code, r.stderr)
	}
	var res struct {
		LeaseMS float64 `json:"lease_ms"`
		Signal  string  `json:"signal"`
		Kills   []struct {
			TakeoverMS float64 `json:"takeover_ms"`
			ResumedMS  float64 `json:"resumed_ms"`
		} `json:"kills"`
		ResumedP99 float64 `json:"resumed_p99_ms"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if res.LeaseMS != 1000 || res.Signal != "SIGKILL" || len(res.Kills) != 1 {
		t.Fatalf("report: %+v", res)
	}
	k := res.Kills[0]
	// A takeover waits out the lease, counted from the last renewal the
	// follower saw (up to a quarter lease before the kill); processing
	// resumes after it.
	if k.TakeoverMS < 0.75*res.LeaseMS || k.ResumedMS < k.TakeoverMS || res.ResumedP99 != k.ResumedMS {
		t.Fatalf("kill figures: %+v, p99 %v", k, res.ResumedP99)
	}
}

// httpGet returns the body of GET url.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCLIClusterTLS runs members that serve their API over HTTPS with
// certificates of a CA made in the test. A follower started with
// --cluster-tls-ca forwards requests to the leader over TLS; one started
// without it (the system's roots do not know the CA) answers
// NO_CLUSTER_LEADER naming the flag, instead of a bare certificate
// error. Before, a leader with such a certificate could not be reached
// through any follower.
func TestCLIClusterTLS(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts servers")
	}
	nc := natscluster.Start(t, 1, 0)
	ca := testpki.NewCA(t, t.TempDir(), "weir-ca")
	pair := ca.Server(t, "weir-member")
	member := func(extra ...string) *serverProc {
		return startServerArgs(t, t.TempDir(), append([]string{"--cluster", "c1", "--nats-url", nc.URLs(), "--cluster-lease", "2s",
			"--tls-cert", pair.CertFile, "--tls-key", pair.KeyFile}, extra...)...)
	}
	leader := member("--cluster-tls-ca", ca.File)
	env := []string{"WEIR_TLS_CA=" + ca.File}
	work := t.TempDir()
	// The first member leads once it answers its own members list.
	var cm client.ClusterMembers
	if !await.Until(60*time.Second, 100*time.Millisecond, func() bool {
		r := runCLIEnv(t, work, env, "cluster", "members", "--format", "json", "--server", leader.url)
		return r.code == ExitOK && json.Unmarshal([]byte(r.stdout), &cm) == nil && len(cm.Members) == 1 && cm.Members[0].Leader
	}) {
		t.Fatalf("the first member does not lead: %+v\nlog:\n%s", cm, leader.log())
	}
	if !strings.HasPrefix(cm.Members[0].Address, "https://") {
		t.Fatalf("the leader's address %q, want https://", cm.Members[0].Address)
	}
	trusting := member("--cluster-tls-ca", ca.File)
	// plain also checkpoints at another interval than the others: the
	// members list names it.
	plain := member("--checkpoint-interval", "250ms")
	r := runCLIEnv(t, work, env, "run", testdata(t, "totals.yaml"), "--job-name", "totals", "--server", trusting.url)
	if r.code != ExitOK {
		t.Fatalf("run through a follower with --cluster-tls-ca: exit %d\n%s\nlog:\n%s", r.code, r.stderr, trusting.log())
	}
	r = runCLIEnv(t, work, env, "jobs", "list", "--server", trusting.url)
	if r.code != ExitOK || !strings.Contains(r.stdout, "totals") {
		t.Fatalf("jobs list through a follower with --cluster-tls-ca: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLIEnv(t, work, env, "jobs", "list", "--server", plain.url)
	if r.code == ExitOK || !strings.Contains(r.stderr, "NO_CLUSTER_LEADER") || !strings.Contains(r.stderr, "--cluster-tls-ca") {
		t.Fatalf("jobs list through a follower without --cluster-tls-ca: exit %d, want NO_CLUSTER_LEADER naming --cluster-tls-ca\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The members list names the setting plain does not share with the
	// leader, in JSON and in text.
	if !await.Until(30*time.Second, 100*time.Millisecond, func() bool {
		r = runCLIEnv(t, work, env, "cluster", "members", "--format", "json", "--server", leader.url)
		cm = client.ClusterMembers{}
		if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &cm) != nil || len(cm.Members) != 3 {
			return false
		}
		differ := 0
		for _, m := range cm.Members {
			if strings.Join(m.SettingsDiffer, ",") == "checkpoint-interval" && strings.HasSuffix(m.Address, plain.url[strings.LastIndexByte(plain.url, ':'):]) {
				differ++
			} else if len(m.SettingsDiffer) > 0 {
				return false
			}
		}
		return differ == 1
	}) {
		t.Fatalf("cluster members: want plain's checkpoint-interval named\n%s%s", r.stdout, r.stderr)
	}
	r = runCLIEnv(t, work, env, "cluster", "members", "--server", leader.url)
	if r.code != ExitOK || !strings.Contains(r.stdout, "runs with other settings than the leader: --checkpoint-interval") {
		t.Fatalf("cluster members (text): exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A CA file without a certificate is refused at the start.
	bad := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(bad, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runCases(t, work, []cliCase{
		{name: "--cluster-tls-ca without a certificate", args: []string{"server", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--cluster", "c1", "--nats-url", nc.URLs(), "--cluster-tls-ca", bad},
			wantCode: ExitUsage, wantStderr: []string{"--cluster-tls-ca", "no PEM certificate"}},
		{name: "--cluster-tls-ca without --cluster", args: []string{"server", "--data-dir", t.TempDir(), "--cluster-tls-ca", ca.File},
			wantCode: ExitUsage, wantStderr: []string{"go with --cluster"}},
	})
}

// TestCLIClusterTokensDiffer: members started with --generate-auth-token
// each generate a token of their own, so a request a follower accepts is
// refused by the leader. The follower says that the members' tokens
// differ and how to give them one (before, the user read "wrong bearer
// token" for the token the follower had just accepted). A member whose
// data directory holds a copy of the leader's generated token serves the
// same request.
func TestCLIClusterTokensDiffer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts servers")
	}
	nc := natscluster.Start(t, 1, 0)
	member := func(dir string) *serverProc {
		return startServerArgs(t, dir, "--cluster", "c1", "--nats-url", nc.URLs(), "--cluster-lease", "2s", "--generate-auth-token")
	}
	work := t.TempDir()
	dirA, dirB, dirC := t.TempDir(), t.TempDir(), t.TempDir()
	a := member(dirA)
	tokA := filepath.Join(dirA, "auth-token")
	if !await.Until(60*time.Second, 100*time.Millisecond, func() bool {
		return runCLI(t, work, "jobs", "list", "--server", a.url, "--token-file", tokA).code == ExitOK
	}) {
		t.Fatalf("the first member does not lead\nlog:\n%s", a.log())
	}
	b := member(dirB)
	// Until b reads the lease it answers NO_CLUSTER_LEADER.
	var r cliResult
	await.Until(30*time.Second, 100*time.Millisecond, func() bool {
		r = runCLI(t, work, "jobs", "list", "--server", b.url, "--token-file", filepath.Join(dirB, "auth-token"))
		return !strings.Contains(r.stderr, "NO_CLUSTER_LEADER")
	})
	if r.code == ExitOK || !strings.Contains(r.stderr, "UNAUTHENTICATED") || !strings.Contains(r.stderr, "do not hold the same tokens") ||
		!strings.Contains(r.stderr, "--auth-token-file") {
		t.Fatalf("a follower's own token: exit %d, want UNAUTHENTICATED saying the members' tokens differ\n%s%s", r.code, r.stdout, r.stderr)
	}
	tok, err := os.ReadFile(tokA)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dirC, "auth-token"), tok, 0o600); err != nil {
		t.Fatal(err)
	}
	c := member(dirC)
	if !await.Until(30*time.Second, 100*time.Millisecond, func() bool {
		r = runCLI(t, work, "jobs", "list", "--server", c.url, "--token-file", tokA)
		return !strings.Contains(r.stderr, "NO_CLUSTER_LEADER")
	}) || r.code != ExitOK {
		t.Fatalf("a follower holding the leader's token: exit %d\n%s\nlog:\n%s", r.code, r.stderr, c.log())
	}
}
