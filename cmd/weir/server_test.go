package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/cmd/weir/internal/serverconn"
	"github.com/weir-dev/weir/internal/await"
)

// serverProc is a `weir server` child process (the test binary acting as
// the CLI) on a free loopback port.
type serverProc struct {
	t       *testing.T
	cmd     *exec.Cmd
	url     string
	logPath string
	done    chan error
	// api is the API client describe asks, made as the CLI makes its own
	// for the address the server printed (a test that rewrites url
	// afterwards describes through the CLI).
	api *client.Client
}

// startServer starts `weir server` on dataDir and waits for its address.
func startServer(t *testing.T, dataDir string) *serverProc {
	t.Helper()
	return startServerArgs(t, dataDir)
}

// startServerArgs is startServer with more flags (a later --listen wins).
func startServerArgs(t *testing.T, dataDir string, extra ...string) *serverProc {
	t.Helper()
	return startServerEnv(t, dataDir, nil, extra...)
}

// startServerEnv is startServerArgs with more environment variables
// (KEY=VALUE) for the server alone: a test that sets them so runs in
// parallel with others (t.Setenv would not let it).
func startServerEnv(t *testing.T, dataDir string, env []string, extra ...string) *serverProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "server.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	// The tests' pipelines live in temporary directories: let them touch
	// those (the default roots are the working directory and the data
	// directory).
	cmd := exec.Command(exe, append([]string{"server", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--checkpoint-interval", "100ms", "--log-level", "info",
		"--pubsub-grpc-listen", "127.0.0.1:0", "--file-roots", os.TempDir()}, extra...)...)
	cmd.Env = append(append(os.Environ(), runAsCLIEnv+"=1"), env...)
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting weir server: %v", err)
	}
	p := &serverProc{t: t, cmd: cmd, logPath: logPath, done: make(chan error, 1)}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		for sc.Scan() {
		}
		p.done <- cmd.Wait()
		logf.Close()
	}()
	select {
	case line, ok := <-lines:
		const prefix = "weir server listening on "
		if !ok || !strings.HasPrefix(line, prefix) {
			t.Fatalf("weir server printed %q, want %q...\nlog:\n%s", line, prefix, p.log())
		}
		p.url, _, _ = strings.Cut(strings.TrimPrefix(line, prefix), " ")
		c, err := serverconn.NewClient(serverconn.Flag{Addr: p.url})
		if err != nil {
			t.Fatalf("an API client of %s: %v", p.url, err)
		}
		p.api = c
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("weir server did not start\nlog:\n%s", p.log())
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.stop(syscall.SIGKILL)
		}
	})
	return p
}

func (p *serverProc) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// stop sends sig and returns the exit code.
func (p *serverProc) stop(sig syscall.Signal) int {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signalling the server: %v", err)
	}
	select {
	case err := <-p.done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ee.ExitCode() == -1 {
				return 128 + int(sig) // killed by the signal
			}
			return ee.ExitCode()
		}
		return 0
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		p.t.Fatalf("the server did not stop on %s\nlog:\n%s", sig, p.log())
		return -1
	}
}

// cli runs the CLI against the server in dir.
func (p *serverProc) cli(dir string, args ...string) cliResult {
	p.t.Helper()
	return runCLI(p.t, dir, append(args, "--server", p.url)...)
}

// describe returns what `weir jobs describe ref --format json` prints:
// the API's job, got the way the CLI gets it (same client, token and CA
// from the environment) but in this process. Tests poll it ten times a
// second; a CLI child process per poll was most of the package's CPU.
// The CLI's describe itself is tested by the tests that run it.
func (p *serverProc) describe(ref string) map[string]any {
	p.t.Helper()
	ctx := context.Background()
	j, err := p.api.Get(ctx, ref)
	if err != nil {
		p.t.Fatalf("describe %s: %v", ref, serverconn.Error(ctx, p.api, err))
	}
	b, err := json.Marshal(j)
	if err != nil {
		p.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		p.t.Fatalf("describe %s: %v\n%s", ref, err, b)
	}
	return m
}

// waitJob polls describe until cond holds.
func (p *serverProc) waitJob(ref, what string, cond func(map[string]any) bool) map[string]any {
	p.t.Helper()
	var m map[string]any
	if !await.Until(30*time.Second, 100*time.Millisecond, func() bool { m = p.describe(ref); return cond(m) }) {
		p.t.Fatalf("job %s: timed out waiting for %s: state %v, error %v, condition %v\n%s\nserver log:\n%s",
			ref, what, m["state"], m["error"], m["condition"], p.diagnosis(ref), p.log())
	}
	return m
}

// diagnosis is what a timed-out wait prints besides the server's log: every
// job of the server and the events of job ref.
func (p *serverProc) diagnosis(ref string) string {
	p.t.Helper()
	list := p.cli("", "jobs", "list", "--format", "json")
	logs := p.cli("", "jobs", "logs", ref)
	return fmt.Sprintf("jobs:\n%s%s\nevents of %s:\n%s%s", list.stdout, list.stderr, ref, logs.stdout, logs.stderr)
}

func stateIs(want string) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["state"] == want }
}

func epochOf(m map[string]any) float64 {
	cp, _ := m["last_checkpoint"].(map[string]any)
	e, _ := cp["epoch"].(float64)
	return e
}

func epochAtLeast(n float64) func(map[string]any) bool {
	return func(m map[string]any) bool { return epochOf(m) >= n }
}

func stepIn(m map[string]any, step string) float64 {
	mm, _ := m["metrics"].(map[string]any)
	steps, _ := mm["steps"].([]any)
	for _, s := range steps {
		if sm, _ := s.(map[string]any); sm["name"] == step {
			v, _ := sm["elements_in"].(float64)
			return v
		}
	}
	return 0
}

// TestCLIServerJobs drives a real `weir server` through the CLI: submit a
// streaming and a batch job, refuse a second active job and invalid input,
// list, describe, drain (several at once), rerun and cancel.
func TestCLIServerJobs(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	work := t.TempDir()
	stream, totals := testdata(t, "stream_windows.yaml"), testdata(t, "totals.yaml")

	r := srv.cli(work, "run", stream, "--job-name", "sums")
	cliCase{args: []string{"run", "--job-name", "sums"}, wantCode: ExitOK}.check(t, r)
	sumsID := strings.TrimSpace(r.stdout)
	if !strings.Contains(sumsID, "_") || strings.Contains(sumsID, " ") {
		t.Fatalf("weir run printed %q, want a job ID", r.stdout)
	}

	r = srv.cli(work, "run", totals, "--job-name", "totals", "--format", "json")
	var sub map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &sub); err != nil || r.code != ExitOK {
		t.Fatalf("run --format json: exit %d, %q (%v)\n%s", r.code, r.stdout, err, r.stderr)
	}
	// The job record, as `jobs describe --format json` prints it.
	for _, k := range []string{"id", "name", "state", "create_time", "generation", "type", "options", "history"} {
		if _, ok := sub[k]; !ok {
			t.Errorf("run --format json lacks %q of the job record: %v", k, sub)
		}
	}
	if sub["name"] != "totals" {
		t.Errorf("run --format json printed the job %v, want totals", sub["name"])
	}
	totalsID := sub["id"].(string)

	for _, tc := range []cliCase{
		{name: "second active job", args: []string{"run", stream, "--job-name", "sums"}, wantCode: ExitFailure, wantStderr: []string{"JOB_NAME_ACTIVE", sumsID}},
		// The server's answer says what was wrong: no usage hint.
		{name: "invalid name", args: []string{"run", totals, "--job-name", "Bad_Name"}, wantCode: ExitUsage, wantStderr: []string{"INVALID_JOB_NAME", "Bad_Name"},
			noStderr: []string{"weir --help"}},
		{name: "invalid pipeline", args: []string{"run", testdata(t, "unknown_type.yaml"), "--job-name", "broken"}, wantCode: ExitInvalidPipeline, wantStderr: []string{"unknown_type.yaml:8:", "Frobnicate"}},
		{name: "missing file", args: []string{"run", "nope.yaml", "--job-name", "x"}, wantCode: ExitInvalidPipeline, wantStderr: []string{"nope.yaml"}},
		{name: "bad status", args: []string{"jobs", "list", "--status", "sleeping"}, wantCode: ExitUsage, wantStderr: []string{"--status"}},
		{name: "describe unknown", args: []string{"jobs", "describe", "nope"}, wantCode: ExitFailure, wantStderr: []string{"JOB_NOT_FOUND"}},
		{name: "drain needs an ID", args: []string{"jobs", "drain"}, wantCode: ExitUsage},
	} {
		tc.check(t, srv.cli(work, tc.args...))
	}

	srv.waitJob("totals", "DONE", stateIs("DONE"))
	srv.waitJob("sums", "elements", func(m map[string]any) bool { return stepIn(m, "Sums") > 0 })

	r = srv.cli("", "jobs", "list")
	cliCase{args: []string{"jobs", "list"}, wantCode: ExitOK, wantStdout: []string{"JOB_ID", "NAME", "TYPE", "CREATION_TIME", "STATE"}}.check(t, r)
	rows := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) != 6 { // the creation time has a date and a time
			t.Errorf("list row %q has %d fields", line, len(f))
			continue
		}
		rows[f[0]] = f[1] + " " + f[2] + " " + f[5]
	}
	if rows[sumsID] != "sums Streaming Running" || rows[totalsID] != "totals Batch Done" {
		t.Errorf("list rows %v", rows)
	}

	r = srv.cli("", "jobs", "list", "--status", "active", "--format", "json")
	var active []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &active); err != nil {
		t.Fatalf("list json: %v\n%s", err, r.stdout)
	}
	if len(active) != 1 || active[0]["id"] != sumsID || active[0]["state"] != "RUNNING" {
		t.Errorf("active jobs %v", active)
	}
	for _, k := range []string{"id", "name", "state", "create_time", "state_time", "generation", "type"} {
		if _, ok := active[0][k]; !ok {
			t.Errorf("list json lacks %q: %v", k, active[0])
		}
	}

	r = srv.cli("", "jobs", "describe", "sums")
	cliCase{args: []string{"jobs", "describe", "sums"}, wantCode: ExitOK, wantStdout: []string{
		"Job ID:", sumsID, "State:", "Running (RUNNING)", "Create time:", "Generation:", "num_workers=1",
		"Lineage:", "first job of its name", "State history:", "PENDING", "RUNNING",
		"Data watermark:", "System lag:", "Backlog:", "STEP", "Sums", "Keyed state (as the last checkpoint stored it):"}}.check(t, r)
	if strings.Contains(r.stdout, "Graph (canonical JSON)") {
		t.Errorf("describe prints the graph without --show-graph:\n%s", r.stdout)
	}
	r = srv.cli("", "jobs", "describe", "sums", "--show-graph")
	cliCase{args: []string{"jobs", "describe", "sums", "--show-graph"}, wantCode: ExitOK, wantStdout: []string{
		"Graph (canonical JSON):", `"format_version"`}}.check(t, r)

	r = srv.cli("", "jobs", "drain", "sums", totalsID, "nope")
	cliCase{args: []string{"jobs", "drain", "sums", totalsID, "nope"}, wantCode: ExitFailure,
		wantStdout: []string{sumsID + " sums (Streaming): Draining"},
		wantStderr: []string{"JOB_TERMINATED", "JOB_NOT_FOUND"}}.check(t, r)
	if n := strings.Count(strings.TrimSpace(r.stdout), "\n"); n != 0 {
		t.Errorf("drain printed %d lines for one drained job:\n%s", n+1, r.stdout)
	}
	d := srv.waitJob(sumsID, "DRAINED", stateIs("DRAINED"))
	if d["type"] != "Streaming" || d["generation"] != 1.0 {
		t.Errorf("drained job %v", d)
	}

	srv.waitJob(sumsID, "its final commit", func(m map[string]any) bool { return m["pending_commit"] != true })
	out, err := readParts(filepath.Join(work, "out", "sums.jsonl"))
	if err != nil {
		t.Fatalf("the job wrote nothing relative to the client's directory: %v", err)
	}
	if !strings.Contains(string(out), `"is_last":true`) || !strings.Contains(string(out), `"window_start"`) {
		t.Errorf("no final windowed pane after the drain:\n%.500s", out)
	}
	if b, err := os.ReadFile(filepath.Join(work, "out", "totals.jsonl")); err != nil || !strings.Contains(string(b), "425") {
		t.Errorf("batch job totals: %s (%v)", b, err)
	}

	// A rerun of the name is generation 2; WEIR_SERVER says where to submit it.
	cmd := exec.Command(mustExe(t), "run", stream, "--job-name", "sums", "--format", "json")
	cmd.Env = append(os.Environ(), runAsCLIEnv+"=1", serverEnv+"="+srv.url)
	cmd.Dir = work
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("run with %s: %v", serverEnv, err)
	}
	if err := json.Unmarshal(b, &sub); err != nil {
		t.Fatal(err)
	}
	if m := srv.describe(sub["id"].(string)); m["generation"] != 2.0 || m["state"] != "RUNNING" {
		t.Errorf("rerun: generation %v, state %v", m["generation"], m["state"])
	}
	r = srv.cli("", "jobs", "cancel", "sums", "--format", "json")
	var cancelled []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &cancelled); err != nil || len(cancelled) != 1 {
		t.Fatalf("cancel json: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	if s := cancelled[0]["state"]; s != "CANCELLING" && s != "CANCELLED" {
		t.Errorf("cancel: state %v", s)
	}
	srv.waitJob(sub["id"].(string), "CANCELLED", stateIs("CANCELLED"))

	// A step without error_handling does not fail a server job: the reject
	// goes to the dead-letter topic of the embedded broker.
	if r := srv.cli(work, "run", testdata(t, "failing.yaml"), "--job-name", "failing"); r.code != ExitOK {
		t.Fatalf("run failing.yaml: %d %s", r.code, r.stderr)
	}
	f := srv.waitJob("failing", "DONE", func(m map[string]any) bool { return m["state"] != "RUNNING" })
	if f["state"] != "DONE" || f["dead_letters"] != 1.0 {
		t.Errorf("failing job: state %v (error %v), dead letters %v", f["state"], f["error"], f["dead_letters"])
	}
	if code := srv.stop(syscall.SIGTERM); code != ExitOK {
		t.Errorf("server exit code on SIGTERM = %d\n%s", code, srv.log())
	}
}

func mustExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func TestCLIServerUnreachable(t *testing.T) {
	runCases(t, "", []cliCase{
		{name: "list", args: []string{"jobs", "list", "--server", "127.0.0.1:1"}, wantCode: ExitServerUnreachable,
			wantStderr: []string{"no weir server answers at http://127.0.0.1:1", "weir server"}},
		{name: "run", args: []string{"run", testdata(t, "totals.yaml"), "--job-name", "totals", "--server", "127.0.0.1:1"}, wantCode: ExitServerUnreachable,
			wantStderr: []string{"go run ./cmd/weir server"}},
		{name: "bad address", args: []string{"jobs", "list", "--server", "ftp://x"}, wantCode: ExitUsage, wantStderr: []string{"--server"}},
		{name: "listen taken", args: []string{"server", "--listen", "256.0.0.1:1", "--data-dir", t.TempDir()}, wantCode: ExitFailure, wantStderr: []string{"listening on 256.0.0.1:1"}},
	})
}

// restartCase says how the server stops while a job runs.
type restartCase struct {
	name     string
	sig      syscall.Signal
	wantCode int
}

// TestCLIServerRestart stops the server while a checkpointed streaming job
// runs, by SIGTERM (checkpoint and clean exit) or by kill -9 (a crash), and
// starts it again on the same data directory: the job is still the name's
// one active job, RUNNING under the same ID, resumed from its last durable
// checkpoint (epochs go on from there, never back), and can be drained.
//
// What the crash case proves: the registry and the checkpoints survive
// SIGKILL at an arbitrary moment of the checkpoint loop, and recovery
// resumes from the last durable cut. It does not prove exactly-once
// output: the only sinks YAML pipelines can use yet are file sinks (not
// transactional) and Generate does not resume from positions, so the
// resumed job's output is at-least-once (its describe says so).
func TestCLIServerRestart(t *testing.T) {
	t.Parallel()
	for _, tc := range []restartCase{
		{"sigterm", syscall.SIGTERM, ExitOK},
		{"kill -9", syscall.SIGKILL, 128 + int(syscall.SIGKILL)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, work := t.TempDir(), t.TempDir()
			srv := startServer(t, dir)
			r := srv.cli(work, "run", testdata(t, "stream_stateless.yaml"), "--job-name", "doubled")
			if r.code != ExitOK {
				t.Fatalf("run: %d %s", r.code, r.stderr)
			}
			id := strings.TrimSpace(r.stdout)
			before := srv.waitJob(id, "three checkpoints", epochAtLeast(3))
			// File sinks commit part files per checkpoint epoch: exactly once.
			if before["checkpointing"] != true || before["delivery"] != "exactly_once" {
				t.Errorf("checkpointing %v, delivery %v", before["checkpointing"], before["delivery"])
			}
			if code := srv.stop(tc.sig); code != tc.wantCode {
				t.Errorf("exit code %d, want %d\n%s", code, tc.wantCode, srv.log())
			}

			srv = startServer(t, dir)
			after := srv.describe("doubled")
			if after["id"] != id || after["state"] != "RUNNING" {
				t.Fatalf("after restart: %v %v, want %s RUNNING\n%s", after["id"], after["state"], id, srv.log())
			}
			if epochOf(after) < epochOf(before) {
				t.Errorf("resumed from checkpoint %v, older than %v seen before the stop", epochOf(after), epochOf(before))
			}
			srv.waitJob(id, "new checkpoints", epochAtLeast(epochOf(after)+3))
			r = srv.cli("", "jobs", "list", "--status", "active", "--format", "json")
			var active []map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &active); err != nil || len(active) != 1 {
				t.Errorf("active jobs after restart: %s (%v)", r.stdout, err)
			}
			if r := srv.cli("", "jobs", "drain", "doubled"); r.code != ExitOK {
				t.Fatalf("drain: %s", r.stderr)
			}
			srv.waitJob(id, "DRAINED", stateIs("DRAINED"))
			if !bytes.Contains([]byte(srv.log()), []byte("resuming job")) {
				t.Errorf("the server log does not mention resuming the job")
			}
		})
	}
}

// TestCLIServerCrashAppendSQL kills the server with SIGKILL twice while a
// checkpointed job writes to a SQLite append sink (WriteToSql, committed per
// checkpoint epoch), restarts it each time, and checks the table once the
// job is DONE: exactly the generated rows, each once.
//
// What it proves: after crashes at arbitrary points of the checkpoint loop,
// recovery (re-commit of the last durable checkpoint, then resumption) plus
// the sink's epoch commits and idempotent append leave no row lost and none
// twice. Generate does not resume from positions (it restarts from its first
// element after a restart), so the "nothing twice" part rests on the append
// sink's element identities, not on source positions; the Pub/Sub source's
// resumption is covered by the yamlpipe and io/pubsub tests.
func TestCLIServerCrashAppendSQL(t *testing.T) {
	t.Parallel()
	// 15 s of input a run: the two kills need 3 and then 2 checkpoints
	// while it runs, and on a loaded machine (a contention run, load 12)
	// 3,000 events (3 s) ended before them ("the job is already DONE").
	const count = 15000
	dir, work := t.TempDir(), t.TempDir()
	db := filepath.Join(work, "events.db")
	pipeline := filepath.Join(work, "events.yaml")
	yaml := `pipeline:
  transforms:
    - type: Generate
      name: Events
      config: {count: ` + strconv.Itoa(count) + `, rate: 1000, keys: 3}
    - type: WriteToSql
      name: WriteEvents
      input: Events
      config: {table: events, mode: append, dsn: "` + db + `"}
`
	if err := os.WriteFile(pipeline, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, dir)
	r := srv.cli(work, "run", pipeline, "--job-name", "events")
	if r.code != ExitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	for i, epochs := range []float64{3, 2} {
		m := srv.waitJob(id, "checkpoints", func(m map[string]any) bool { return epochOf(m) >= epochs || m["state"] != "RUNNING" })
		if m["state"] != "RUNNING" {
			t.Fatalf("crash %d: the job is already %v", i, m["state"])
		}
		if m["checkpointing"] != true {
			t.Fatalf("the job runs without checkpoints: %v", m["checkpoint_note"])
		}
		srv.stop(syscall.SIGKILL)
		srv = startServer(t, dir)
	}
	// DONE is durable with the final checkpoint; pending_commit clears once
	// the sink has committed it.
	done := srv.waitJob(id, "DONE", func(m map[string]any) bool { return m["state"] != "RUNNING" && m["pending_commit"] == nil })
	if done["state"] != "DONE" {
		t.Fatalf("state %v (error %v)", done["state"], done["error"])
	}
	conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var rows, distinct, minID, maxID int64
	if err := conn.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT id), MIN(id), MAX(id) FROM events`).Scan(&rows, &distinct, &minID, &maxID); err != nil {
		t.Fatal(err)
	}
	if rows != count || distinct != count || minID != 0 || maxID != count-1 {
		t.Errorf("table holds %d rows (%d distinct ids, %d..%d), want each of 0..%d once", rows, distinct, minID, maxID, count-1)
	}
	srv.stop(syscall.SIGTERM)
}

// readParts returns what a streaming job's file sink committed for path:
// its part files (files.PartName) concatenated in name order.
func readParts(path string) ([]byte, error) {
	ext := filepath.Ext(path)
	parts, err := filepath.Glob(strings.TrimSuffix(path, ext) + "-g*-e*-w*" + ext)
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("no part files of %s", path)
	}
	sort.Strings(parts)
	var out []byte
	for _, p := range parts {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}
