package main

import (
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/await"
)

// TestCLIServerCrashRollback kills the server with SIGKILL at a seeded
// random point of `weir jobs rollback` after an in-place update (while the
// request runs, while the updated job drains, around the cut-over that
// restores the snapshot), restarts it, and checks that the rollback
// completes: exactly one job of the name is active (the rollback job,
// generation 3, CUT_OVER), and after it re-read the input since the
// snapshot, read later input and drained, every (key, window) total in the
// table equals v1's ground truth for all the input although v2 counted
// only even amounts. `--validate-only` first reports and changes nothing;
// `jobs history` lists the three generations. Two seeded points run by
// default; WEIR_ROLLBACK_CRASH_POINTS=N runs N.
func TestCLIServerCrashRollback(t *testing.T) {
	t.Parallel()
	forEachCrashPoint(t, "WEIR_ROLLBACK_CRASH_POINTS", crashRollback)
}

func crashRollback(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 31))
	dir, work := t.TempDir(), t.TempDir()
	db := filepath.Join(work, "totals.db")
	even := "    - type: Filter\n      name: EvenOnly\n      input: Orders\n      config: {keep: \"amount % 2 == 0\"}\n"
	v1 := writeTestFile(t, work, "v1.yaml", totalsPipeline("subscription: orders-sub", "", "", "", db))
	v2 := writeTestFile(t, work, "v2.yaml", totalsPipeline("subscription: orders-sub", even, "EvenOnly", "", db))
	// The input, with v1's ground truth.
	in := newCrashInput(t, work, 5)
	chunk := in.chunk
	publish := func(srv *serverProc, path string) {
		t.Helper()
		srv.publish(t, work, path)
	}
	start := func() *serverProc { return startServerArgs(t, dir) }
	srv := start()
	srv.mustCLI(t, work, "topics", "create", "orders")
	srv.mustCLI(t, work, "subscriptions", "create", "orders-sub", "--topic", "orders", "--from-beginning")
	id1 := strings.TrimSpace(srv.mustCLI(t, work, "run", v1, "--job-name", "orders").stdout)
	// 90 s of event time: the window [1m, 2m) is open at the update.
	publish(srv, chunk(0, 900, 0))
	waitCaughtUp(t, srv, id1)
	if r := srv.cli(work, "run", v2, "--job-name", "orders", "--update"); r.code != ExitOK {
		t.Fatalf("update to v2: %d %s", r.code, r.stderr)
	}
	id2, _ := srv.describe("orders")["id"].(string)
	if id2 == id1 {
		t.Fatalf("the update did not replace job %s", id1)
	}
	publish(srv, chunk(900, 1800, 90*time.Second))
	waitCaughtUp(t, srv, id2)

	// The rollback snapshot is copied in the background after the update
	// (paced): until it is READY the server answers ROLLBACK_UNAVAILABLE.
	var vo cliResult
	if !await.Until(60*time.Second, 50*time.Millisecond, func() bool {
		vo = srv.cli(work, "jobs", "rollback", "orders", "--validate-only", "--format", "json")
		return vo.code == ExitOK || !strings.Contains(vo.stderr, "ROLLBACK_UNAVAILABLE")
	}) || vo.code != ExitOK {
		t.Fatalf("validate-only rollback: %d %s", vo.code, vo.stderr)
	}
	var rep struct {
		ToGeneration  int64 `json:"to_generation"`
		NewGeneration int64 `json:"new_generation"`
		Sources       []struct {
			Messages uint64 `json:"messages"`
			Retained bool   `json:"retained"`
		} `json:"sources"`
	}
	if err := json.Unmarshal([]byte(vo.stdout), &rep); err != nil || rep.ToGeneration != 1 || rep.NewGeneration != 3 ||
		len(rep.Sources) != 1 || rep.Sources[0].Messages != 900 || !rep.Sources[0].Retained {
		t.Fatalf("validate-only report %+v (%v):\n%s", rep, err, vo.stdout)
	}
	if m := srv.describe("orders"); m["id"] != id2 || m["state"] != "RUNNING" {
		t.Fatalf("validate-only changed the name: %v %v", m["id"], m["state"])
	}

	// The rollback, with the server killed at a seeded point.
	done := make(chan cliResult, 1)
	go func() { done <- srv.cli(work, "jobs", "rollback", "orders") }()
	<-time.After(time.Duration(rng.IntN(150)) * time.Millisecond) // the crash point, on purpose a delay
	srv.stop(syscall.SIGKILL)
	first := <-done
	srv = start()
	m := srv.describe("orders")
	if rp, ok := m["replacement"].(map[string]any); ok && m["id"] != id2 {
		t.Logf("crash point: the rollback was in phase %v (rollback job %v), job %s %v", rp["phase"], m["state"], id2, srv.describe(id2)["state"])
	} else {
		t.Logf("crash point: before the rollback was recorded (first attempt exit %d)", first.code)
	}
	if m["id"] == id2 {
		// --wait follows the flow to its cut-over.
		r := srv.cli(work, "jobs", "rollback", "orders", "--wait")
		if r.code != ExitOK {
			t.Fatalf("the rollback after the restart: %d %s (first attempt: %d %s)", r.code, r.stderr, first.code, first.stderr)
		}
		if !strings.Contains(r.stderr, "(rollback): CUT_OVER") {
			t.Errorf("jobs rollback --wait printed no cut-over:\n%s", r.stderr)
		}
	}
	fin := srv.waitJob("orders", "the cut-over", func(m map[string]any) bool {
		rp, _ := m["replacement"].(map[string]any)
		return rp != nil && (rp["phase"] == "CUT_OVER" || rp["phase"] == "FAILED") && m["state"] != "PENDING"
	})
	if rp := fin["replacement"].(map[string]any); rp["phase"] != "CUT_OVER" || fin["state"] != "RUNNING" || rp["strategy"] != "rollback" || fin["generation"] != float64(3) {
		t.Fatalf("after the restart the rollback ended %v, job %v generation %v (%v)\nserver log:\n%s", rp, fin["state"], fin["generation"], fin["error"], srv.log())
	}
	id3 := fin["id"].(string)
	if old := srv.describe(id2); old["state"] != "DRAINED" || old["replaced_by_job_id"] != id3 {
		t.Fatalf("rolled-back job: %v replaced by %v", old["state"], old["replaced_by_job_id"])
	}
	checkOnlyActive(t, srv, work, id3)
	publish(srv, chunk(1800, 2400, 10*time.Minute))
	waitCaughtUp(t, srv, id3)
	drainAndCheckTotals(t, srv, work, id3, db, in.want, in.wantN)
	h := srv.cli(work, "jobs", "history", "orders")
	if h.code != ExitOK || !strings.Contains(h.stdout, "rollback to generation 1") || !strings.Contains(h.stdout, "in_place_update") {
		t.Fatalf("jobs history: %d %s\n%s", h.code, h.stderr, h.stdout)
	}
	if l := srv.cli(work, "snapshots", "list", "--job-id", "orders"); l.code != ExitOK || !strings.Contains(l.stdout, id1) || !strings.Contains(l.stdout, "rollback") {
		t.Fatalf("snapshots list: %d %s\n%s", l.code, l.stderr, l.stdout)
	}
	srv.stop(syscall.SIGTERM)
}

// TestCLIRollbackRequestID: `weir jobs rollback NAME --request-id ID`
// against a real server is idempotent as a submission is: a refusal
// retried is the same refusal; after an in-place update, the rollback and
// its retry answer the same rollback job (never a second rollback); the
// same ID with another request is refused by the server (exit 1,
// REQUEST_ID_REUSED).
func TestCLIRollbackRequestID(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir := t.TempDir()
	p := startServer(t, filepath.Join(dir, "data"))
	pipe, err := filepath.Abs("testdata/stream_windows.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if r := p.cli(dir, "run", pipe, "--job-name", "sums", "--no-wait"); r.code != ExitOK {
		t.Fatalf("run: exit %d: %s", r.code, r.stderr)
	}
	p.waitJob("sums", "a checkpoint", epochAtLeast(1))
	for i := range 2 {
		r := p.cli(dir, "jobs", "rollback", "sums", "--request-id", "rb-none")
		if r.code != ExitFailure || !strings.Contains(r.stderr, "NO_ROLLBACK_SNAPSHOT") {
			t.Fatalf("attempt %d of a rollback with no rollback snapshot: exit %d: %s", i+1, r.code, r.stderr)
		}
	}
	if r := p.cli(dir, "run", pipe, "--job-name", "sums", "--update"); r.code != ExitOK {
		t.Fatalf("in-place update: exit %d: %s", r.code, r.stderr)
	}
	jobOf := func(r cliResult) (id string, gen float64) {
		t.Helper()
		var out struct {
			Job struct {
				ID         string  `json:"id"`
				Generation float64 `json:"generation"`
			} `json:"job"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Job.ID == "" {
			t.Fatalf("no rollback job in %q (%v); stderr %s", r.stdout, err, r.stderr)
		}
		return out.Job.ID, out.Job.Generation
	}
	// The rollback snapshot is copied after the update: until it is READY
	// the server answers ROLLBACK_UNAVAILABLE, which a retry asks again.
	var first cliResult
	if !await.Until(30*time.Second, 100*time.Millisecond, func() bool {
		first = p.cli(dir, "jobs", "rollback", "sums", "--request-id", "rb-1", "--format", "json")
		return first.code != ExitFailure || !strings.Contains(first.stderr, "ROLLBACK_UNAVAILABLE")
	}) {
		t.Fatalf("the rollback stayed unavailable: %s", first.stderr)
	}
	if first.code != ExitOK {
		t.Fatalf("rollback: exit %d: %s", first.code, first.stderr)
	}
	id, gen := jobOf(first)
	if gen != 3 {
		t.Fatalf("the rollback job %s has generation %v, want 3", id, gen)
	}
	r := p.cli(dir, "jobs", "rollback", "sums", "--request_id", "rb-1", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("retry: exit %d: %s", r.code, r.stderr)
	}
	if again, _ := jobOf(r); again != id {
		t.Fatalf("the retry answered job %s, want the first rollback's %s", again, id)
	}
	r = p.cli(dir, "jobs", "rollback", "sums", "--request-id", "rb-1", "--to-generation", "1")
	if r.code != ExitFailure || !strings.Contains(r.stderr, "REQUEST_ID_REUSED") {
		t.Fatalf("the same ID with another request: exit %d: %s", r.code, r.stderr)
	}
	if m := p.describe("sums"); m["id"] != id {
		t.Fatalf("the name's job is %v, want the rollback job %s", m["id"], id)
	}
	r = p.cli(dir, "jobs", "list", "--status", "all", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("jobs list: exit %d: %s", r.code, r.stderr)
	}
	if n := strings.Count(r.stdout, `"name":"sums"`) + strings.Count(r.stdout, `"name": "sums"`); n != 3 {
		t.Fatalf("%d jobs of sums, want 3 (no second rollback):\n%s", n, r.stdout)
	}
}
