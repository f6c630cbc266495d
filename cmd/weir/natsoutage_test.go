package main

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/internal/natscluster"
)

// TestCLIServerNATSOutage runs a real weir server on an external NATS
// server with a job ReadFromPubSub → windowed Combine → WriteToSql, and
// stops the NATS server mid-stream and rescales the job, whose new
// execution cannot open its subscription (a second job, left running,
// finds its broker gone after --nats-unreachable-after and waits for it
// too, and is cancelled while it waits: the cancel completes without the
// broker). While the job waits it is updated in place (an appended count
// with an init): the update is made in the store and the new job waits in
// its place, and rescaled (recorded: the retry that finds the broker starts
// it with the new worker count), and snapshotted (cut from its last durable
// checkpoint).
// The job is not FAILED: it stays
// RUNNING with condition CONNECTOR_UNAVAILABLE, its table and its
// subscription's acknowledgement do not move, and the server starts it
// again from its last durable checkpoint on every retry interval. Once the
// NATS server is back (same port, same storage), the job reads on by
// itself, the condition clears with an event, and after a drain the table
// equals the ground truth: nothing acknowledged lost, nothing counted
// twice. (A job whose execution failed on an unavailable broker used to
// end FAILED, and one resuming while the broker reloaded after a full
// disk too.)
func TestCLIServerNATSOutage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts servers")
	}
	nc := natscluster.Start(t, 1, 0)
	natsURL := nc.URLs()
	dir, work := t.TempDir(), t.TempDir()
	pipeline, db := writeOrdersPipeline(t, work, "totals")
	f := newOrdersFeed(t, work)
	srv := startServerArgs(t, dir, "--nats-url", natsURL, "--storage-retry-interval", "300ms", "--nats-unreachable-after", "1s")
	id, sub := f.start(srv, pipeline)
	// A second job on the same topic, left alone: its running execution
	// finds the broker gone and waits for it (not idling unseen), and is
	// cancelled while it waits.
	other, _ := writeOrdersPipeline(t, work, "other")
	r := srv.cli(work, "run", other, "--job-name", "other")
	if r.code != ExitOK {
		t.Fatalf("run other: %d %s", r.code, r.stderr)
	}
	otherID := strings.TrimSpace(r.stdout)
	srv.waitJob(otherID, "RUNNING", stateIs("RUNNING"))
	f.publish(srv, 0, 3000)
	waitCaughtUp(t, srv, id)
	srv.waitJob(id, "rows committed", func(map[string]any) bool { return tableTotal(t, db) != "" })
	floor := f.ackFloor(srv, sub)

	nc.StopServer(0)
	// A rescale while the broker is away: the job's new execution cannot
	// open its subscription.
	if r := srv.cli(work, "jobs", "update-options", id, "--num-workers", "2"); r.code != ExitOK {
		t.Logf("rescale with the NATS server down: exit %d %s", r.code, r.stderr)
	}
	if !await.Until(90*time.Second, 100*time.Millisecond, func() bool {
		c, _ := srv.describe(id)["condition"].(map[string]any)
		return c != nil && c["code"] == "CONNECTOR_UNAVAILABLE"
	}) {
		t.Fatalf("no CONNECTOR_UNAVAILABLE condition with the NATS server down: %v\nserver log:\n%s", srv.describe(id), srv.log())
	}
	m := srv.describe(id)
	if m["state"] != "RUNNING" {
		t.Fatalf("state %v with the NATS server down, want RUNNING\nserver log:\n%s", m["state"], srv.log())
	}
	c := m["condition"].(map[string]any)
	if msg, _ := c["message"].(string); !strings.Contains(msg, "broker unavailable") {
		t.Errorf("the condition does not name the cause: %v", c)
	}
	rows := tableTotal(t, db)
	// An in-place update while the job waits for its broker is made in
	// the store: the new job (an appended count initialised from n) waits
	// in its place and starts at the next retry that finds the broker.
	v2 := filepath.Join(work, "orders-v2.yaml")
	src := strings.Replace(ordersTotalsYAML(db), "n: {value: amount, fn: count}}",
		"n: {value: amount, fn: count}, n2: {value: amount, fn: count}}\n      migrations: {accumulators: {n2: {init: \"n\"}}}", 1)
	if err := os.WriteFile(v2, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	// A validate-only update changes nothing, waiting or not; an
	// incompatible one (the Combine renamed without a mapping) is refused
	// and leaves the job waiting.
	r = srv.cli(work, "run", v2, "--job-name", "orders", "--update", "--validate-only")
	if r.code != ExitOK || !strings.Contains(r.stdout, "is compatible (not applied") || !strings.Contains(r.stderr, "CONNECTOR_UNAVAILABLE") {
		t.Fatalf("a validate-only update while the job waits: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	renamed := filepath.Join(work, "orders-renamed.yaml")
	if err := os.WriteFile(renamed, []byte(strings.Replace(strings.Replace(ordersTotalsYAML(db), "name: Totals", "name: Sums", 1), "input: Totals", "input: Sums", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := srv.cli(work, "run", renamed, "--job-name", "orders", "--update"); r.code != ExitIncompatible {
		t.Fatalf("an incompatible update while the job waits: exit %d, want %d\n%s", r.code, ExitIncompatible, r.stderr)
	}
	if m := srv.describe("orders"); m["id"] != id || m["state"] != "RUNNING" {
		t.Fatalf("after a validate-only and a refused update: active job %v (%v), want %s RUNNING", m["id"], m["state"], id)
	}
	r = srv.cli(work, "run", v2, "--job-name", "orders", "--update")
	if r.code != ExitOK || !strings.Contains(r.stderr, "in the store") {
		t.Fatalf("an update while the job waits for its broker: exit %d\nstdout %s\nstderr %s\nserver log:\n%s", r.code, r.stdout, r.stderr, srv.log())
	}
	oldID := id
	id, _, _ = strings.Cut(strings.TrimSpace(r.stdout), "\n") // the new job's ID, then the check's report
	if m := srv.describe(oldID); m["state"] != "UPDATED" || m["replaced_by_job_id"] != id {
		t.Fatalf("the job updated while it waited: state %v, replaced by %v; want UPDATED by %s", m["state"], m["replaced_by_job_id"], id)
	}
	srv.waitJob(id, "the new job waits for the broker", func(m map[string]any) bool {
		c, _ := m["condition"].(map[string]any)
		return m["state"] == "RUNNING" && c != nil && c["code"] == "CONNECTOR_UNAVAILABLE"
	})
	// A rescale while it waits is recorded: the next retry starts it so.
	if r := srv.cli(work, "jobs", "update-options", id, "--num-workers", "3"); r.code != ExitOK {
		t.Fatalf("a rescale while the job waits for its broker: exit %d %s", r.code, r.stderr)
	}
	if opts, _ := srv.describe(id)["options"].(map[string]any); opts["num_workers"] != float64(3) {
		t.Fatalf("options after a rescale while the job waits: %v, want num_workers 3", opts)
	}
	// A snapshot while it waits is cut from its last durable checkpoint.
	var snap struct {
		ID    string `json:"id"`
		State string `json:"state"`
		Epoch uint64 `json:"epoch"`
	}
	r = srv.cli(work, "snapshots", "create", "--job-id", "orders", "--wait", "--format", "json")
	if err := json.Unmarshal([]byte(r.stdout), &snap); r.code != ExitOK || err != nil || snap.State != "READY" || snap.Epoch == 0 {
		t.Fatalf("a snapshot while the job waits for its broker: exit %d, %+v (%v)\n%s", r.code, snap, err, r.stderr)
	}
	// A job waiting for its broker can be cancelled: the cancel completes
	// at the next retry, without the broker.
	srv.waitJob(otherID, "CONNECTOR_UNAVAILABLE", func(m map[string]any) bool {
		c, _ := m["condition"].(map[string]any)
		return c != nil && c["code"] == "CONNECTOR_UNAVAILABLE"
	})
	// The condition names the latest cause (a retry's, once one failed);
	// the event that set it names the first: the connection lost.
	if r := srv.cli(work, "jobs", "logs", otherID); !strings.Contains(r.stdout, "the connection to the NATS server has been down") {
		t.Errorf("the running job's events do not say its connection was lost:\n%s", r.stdout)
	}
	if r := srv.cli(work, "jobs", "cancel", otherID); r.code != ExitOK {
		t.Fatalf("cancel with the NATS server down: %d %s", r.code, r.stderr)
	}
	srv.waitJob(otherID, "CANCELLED", stateIs("CANCELLED"))
	if !await.Until(60*time.Second, 100*time.Millisecond, func() bool {
		return strings.Count(srv.log(), "a connector is still unavailable") >= 2
	}) {
		t.Fatalf("the server did not start the job again while NATS was down\nserver log:\n%s", srv.log())
	}
	if got := tableTotal(t, db); got != rows {
		t.Errorf("the table changed from %s to %s with the NATS server down", rows, got)
	}
	if m := srv.describe(id); m["state"] != "RUNNING" {
		t.Fatalf("state %v after failed retries, want RUNNING", m["state"])
	}

	// The NATS server comes back on the same port with the same storage:
	// the job reads on by itself.
	if err := nc.StartServer(0); err != nil {
		t.Fatal(err)
	}
	srv.waitJob(id, "the condition to clear", func(m map[string]any) bool {
		return m["state"] == "RUNNING" && m["condition"] == nil
	})
	if got := f.ackFloor(srv, sub); got < floor {
		t.Errorf("the acknowledgement went back from %v to %v", floor, got)
	}
	f.publish(srv, 3000, 6000)
	waitCaughtUp(t, srv, id)
	for _, l := range []struct{ id, want string }{
		{oldID, "a connector is unavailable"}, {oldID, "while it waited for its connector"},
		{id, "which waited for its connector"}, {id, "rescaled from 2 to 3 workers while the job waits"}, {id, "the connectors answer again"},
	} {
		r = srv.cli(work, "jobs", "logs", l.id)
		if r.code != ExitOK {
			t.Fatalf("jobs logs: %d %s", r.code, r.stderr)
		}
		if !strings.Contains(r.stdout, l.want) {
			t.Errorf("the events of job %s lack %q:\n%s\nserver log:\n%s", l.id, l.want, r.stdout, srv.log())
		}
	}
	drainAndCheckTotals(t, srv, work, id, db, f.want, f.wantN)
	// The appended count: every window the new job wrote counts what n
	// counts (the windows open at the update started from n).
	if bad, set := appendedCountMismatches(t, db); set == 0 || bad != 0 {
		t.Errorf("n2 set in %d rows, differing from n in %d; want it set and equal to n", set, bad)
	}
	if t.Failed() {
		r := srv.cli(work, "jobs", "describe", id)
		t.Logf("the job:\n%s\nserver log:\n%s", r.stdout, srv.log())
	}
	srv.stop(syscall.SIGTERM)
}

// appendedCountMismatches counts the rows of db's totals table whose n2
// is set, and those of them whose n2 differs from n.
func appendedCountMismatches(t *testing.T, db string) (bad, set int) {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.QueryRow(`SELECT count(*) FILTER (WHERE n2 IS NOT n), count(*) FROM totals WHERE n2 IS NOT NULL`).Scan(&bad, &set); err != nil {
		t.Fatal(err)
	}
	return bad, set
}
