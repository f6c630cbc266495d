package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/service"
)

// crashPoints is how many seeded kill points each operation of
// TestCLIServerCrashSnapshot gets: 2, or WEIR_SNAPSHOT_CRASH_POINTS.
func crashPoints(t *testing.T) int {
	return crashPointsFrom(t, "WEIR_SNAPSHOT_CRASH_POINTS")
}

// asyncCLI starts the CLI against srv and returns its wait.
func asyncCLI(t *testing.T, srv *serverProc, dir string, args ...string) func() cliResult {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, append(args, "--server", srv.url)...)
	cmd.Env = append(os.Environ(), runAsCLIEnv+"=1")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return func() cliResult {
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("weir %v: %v", args, err)
		}
		return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
	}
}

// snapshotRecords lists every snapshot of the server, DELETED ones too.
func snapshotRecords(t *testing.T, srv *serverProc) map[string]client.Snapshot {
	t.Helper()
	r := srv.cli("", "snapshots", "list", "--all", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("snapshots list: %d %s", r.code, r.stderr)
	}
	var list []client.Snapshot
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("snapshots list: %v\n%s", err, r.stdout)
	}
	out := map[string]client.Snapshot{}
	for _, s := range list {
		out[s.ID] = s
	}
	return out
}

// checkSnapshotsSettled checks, after a restart, that no snapshot is left
// PENDING or RUNNING, that every READY one is complete (it exports to a
// file that verifies, with as many bytes of data as its record says) and
// every FAILED one has no data; it returns the records.
func checkSnapshotsSettled(t *testing.T, srv *serverProc, work string) map[string]client.Snapshot {
	t.Helper()
	recs := snapshotRecords(t, srv)
	for id, s := range recs {
		switch s.State {
		case client.SnapshotReady:
			f := filepath.Join(work, "check-"+id+".weirsnap")
			if r := srv.cli(work, "snapshots", "export", id, "--output", f); r.code != ExitOK {
				t.Errorf("READY snapshot %s does not export: %d %s", id, r.code, r.stderr)
				continue
			}
			in, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			info, err := service.VerifySnapshotFile(in)
			in.Close()
			os.Remove(f)
			if err != nil || info.SnapshotID != id || info.Entries == 0 {
				t.Errorf("READY snapshot %s exports %+v, %v", id, info, err)
			}
		case client.SnapshotFailed, client.SnapshotDeleted:
			if s.DiskSizeBytes != 0 {
				t.Errorf("%s snapshot %s claims %d bytes of data", s.State, id, s.DiskSizeBytes)
			}
		default:
			t.Errorf("snapshot %s is %s after the restart: want READY, FAILED or absent", id, s.State)
		}
	}
	return recs
}

// TestCLIServerCrashSnapshot kills `weir server` with SIGKILL at seeded
// random points during snapshot creation, export, import and
// create-from-snapshot (each operation crashPoints times), with Pub/Sub in
// and an upsert SQL table out. After every restart no snapshot is left
// half made (READY and complete, or FAILED / absent), the file an export
// was writing is absent or complete, and the job resumes; at the end the
// job started from the snapshot is drained and every (key, window) total
// and count in the table equals the ground truth: nothing lost, nothing
// counted twice, whatever the crashes interrupted.
func TestCLIServerCrashSnapshot(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts servers")
	}
	seed := uint64(9)
	if v := os.Getenv("WEIR_SNAPSHOT_CRASH_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("WEIR_SNAPSHOT_CRASH_SEED=%q: %v", v, err)
		}
	}
	points := crashPoints(t)
	t.Logf("seed %d, %d kill points per operation", seed, points)
	rng := rand.New(rand.NewPCG(seed, 17))
	killDelay := func() time.Duration { return time.Duration(rng.IntN(250)) * time.Millisecond }

	dir, work := t.TempDir(), t.TempDir()
	db := filepath.Join(work, "totals.db")
	pipeline := filepath.Join(work, "p.yaml")
	yaml := `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Orders
      config: {topic: orders, schema: {key: string, amount: int, ts: timestamp}, timestamp_field: ts, idle_timeout: 1h, max_out_of_orderness: 1s}
    - type: Combine
      name: Totals
      input: Orders
      windowing: {type: fixed, size: 1m}
      config:
        group_by: key
        combine: {total: {value: amount, fn: sum}, n: {value: amount, fn: count}}
    - type: WriteToSql
      name: Write
      input: Totals
      config: {dsn: "` + db + `", table: totals, key: [key]}
`
	if err := os.WriteFile(pipeline, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	want, wantN := map[string]int64{}, map[string]int64{}
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	publish := func(srv *serverProc, from, to int) {
		t.Helper()
		var b strings.Builder
		for i := from; i < to; i++ {
			// Many keys, so that a snapshot has enough state to be cut
			// into; event times 10 ms apart (a few one-minute windows).
			k := fmt.Sprintf("k%d", i%997)
			ts := base.Add(time.Duration(i) * 10 * time.Millisecond)
			w := ts.Truncate(time.Minute).Format(time.RFC3339)
			want[k+" "+w] += int64(i)
			wantN[k+" "+w]++
			fmt.Fprintf(&b, `{"key": %q, "amount": %d, "ts": %q, "id": %d}`+"\n", k, i, ts.Format(time.RFC3339Nano), i)
		}
		path := filepath.Join(work, fmt.Sprintf("chunk-%d.jsonl", from))
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		// --id-field: a publish retried after a crash is harmless.
		if r := srv.cli(work, "topics", "publish", "orders", "--file", path, "--id-field", "id"); r.code != ExitOK {
			t.Fatalf("publish %d..%d: %d %s", from, to, r.code, r.stderr)
		}
	}
	restart := func(srv *serverProc, what string) *serverProc {
		t.Helper()
		if code := srv.stop(syscall.SIGKILL); code != 128+int(syscall.SIGKILL) {
			t.Logf("%s: the server had exited with %d before the kill", what, code)
		}
		return startServer(t, dir)
	}

	srv := startServer(t, dir)
	if r := srv.cli(work, "topics", "create", "orders"); r.code != ExitOK {
		t.Fatalf("topics create: %d %s", r.code, r.stderr)
	}
	r := srv.cli(work, "run", pipeline, "--job-name", "orders")
	if r.code != ExitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	v1 := strings.TrimSpace(r.stdout)
	srv.waitJob(v1, "RUNNING", stateIs("RUNNING"))
	sub := pubsub.SubscriptionName("orders", "Orders")
	waitFor(t, srv, "the job's subscription "+sub, func() bool { return srv.cli(work, "subscriptions", "describe", sub).code == ExitOK })
	publish(srv, 0, 3000)
	waitCaughtUp(t, srv, v1)

	// 1. Kill during snapshot creation. Messages keep coming, so the job
	// has state to change while the snapshot is cut and copied.
	outcomes := map[string][]string{}
	for i := 0; i < points; i++ {
		publish(srv, 3000+i*500, 3500+i*500)
		wait := asyncCLI(t, srv, work, "snapshots", "create", "--job-id", "orders", "--wait")
		<-time.After(killDelay()) // a kill point on purpose: wherever it lands
		srv = restart(srv, "create")
		res := wait()
		srv.waitJob(v1, "RUNNING after the restart", stateIs("RUNNING"))
		recs := checkSnapshotsSettled(t, srv, work)
		outcomes["create"] = append(outcomes["create"], fmt.Sprintf("cli exit %d, %d snapshot(s) %v", res.code, len(recs), statesOf(recs)))
	}
	next := 3000 + points*500

	// A snapshot to export, import and start from.
	r = srv.cli(work, "snapshots", "create", "--job-id", "orders", "--wait")
	if r.code != ExitOK {
		t.Fatalf("snapshots create: %d %s%s", r.code, r.stdout, r.stderr)
	}
	snapID := lastField(r.stdout)
	if recs := snapshotRecords(t, srv); recs[snapID].State != client.SnapshotReady {
		t.Fatalf("snapshot %q is %+v\n%s", snapID, recs[snapID], r.stdout)
	}

	// 2. Kill during export: the output file is absent or complete.
	for i := 0; i < points; i++ {
		f := filepath.Join(work, fmt.Sprintf("export-%d.weirsnap", i))
		wait := asyncCLI(t, srv, work, "snapshots", "export", snapID, "--output", f)
		<-time.After(killDelay()) // a kill point on purpose: wherever it lands
		srv = restart(srv, "export")
		res := wait()
		srv.waitJob(v1, "RUNNING after the restart", stateIs("RUNNING"))
		what := "no file"
		if in, err := os.Open(f); err == nil {
			info, verr := service.VerifySnapshotFile(in)
			in.Close()
			if verr != nil || info.SnapshotID != snapID {
				t.Errorf("export %d cut short by a kill left a bad file: %+v, %v", i, info, verr)
			}
			what = "complete file"
		}
		if res.code == ExitOK && what == "no file" {
			t.Errorf("export %d exited 0 but wrote no file", i)
		}
		if recs := checkSnapshotsSettled(t, srv, work); recs[snapID].State != client.SnapshotReady {
			t.Errorf("after a kill during its export snapshot %s is %s", snapID, recs[snapID].State)
		}
		outcomes["export"] = append(outcomes["export"], fmt.Sprintf("cli exit %d, %s", res.code, what))
	}
	file := filepath.Join(work, "snapshot.weirsnap")
	if r := srv.cli(work, "snapshots", "export", snapID, "--output", file); r.code != ExitOK {
		t.Fatalf("export: %d %s", r.code, r.stderr)
	}

	// 3. Kill during import (of the deleted snapshot's file): afterwards
	// the snapshot is READY and complete, or not there (absent or its
	// DELETED tombstone), never PENDING.
	// The previous kill may have left the snapshot absent (the import had
	// not committed it): only a READY snapshot is deleted first.
	for i := 0; i < points; i++ {
		if snapshotRecords(t, srv)[snapID].State == client.SnapshotReady {
			if r := srv.cli(work, "snapshots", "delete", snapID); r.code != ExitOK {
				t.Fatalf("delete: %d %s", r.code, r.stderr)
			}
		}
		wait := asyncCLI(t, srv, work, "snapshots", "import", file)
		<-time.After(killDelay()) // a kill point on purpose: wherever it lands
		srv = restart(srv, "import")
		res := wait()
		srv.waitJob(v1, "RUNNING after the restart", stateIs("RUNNING"))
		recs := checkSnapshotsSettled(t, srv, work)
		st := recs[snapID].State
		if st != client.SnapshotReady && st != client.SnapshotDeleted && st != "" {
			t.Errorf("after a kill during its import snapshot %s is %s", snapID, st)
		}
		if res.code == ExitOK && st != client.SnapshotReady {
			t.Errorf("import %d exited 0 but the snapshot is %q", i, st)
		}
		outcomes["import"] = append(outcomes["import"], fmt.Sprintf("cli exit %d, snapshot %q", res.code, st))
	}
	if snapshotRecords(t, srv)[snapID].State != client.SnapshotReady {
		if r := srv.cli(work, "snapshots", "import", file); r.code != ExitOK {
			t.Fatalf("import: %d %s", r.code, r.stderr)
		}
	}

	// 4. Kill during create-from-snapshot: afterwards a job of the name
	// started from the snapshot is there, or none is active.
	if r := srv.cli(work, "jobs", "cancel", v1); r.code != ExitOK {
		t.Fatalf("cancel: %d %s", r.code, r.stderr)
	}
	srv.waitJob(v1, "CANCELLED", stateIs("CANCELLED"))
	var v2 string
	for i := 0; i < points; i++ {
		wait := asyncCLI(t, srv, work, "run", pipeline, "--job-name", "orders", "--create-from-snapshot", snapID)
		<-time.After(killDelay()) // a kill point on purpose: wherever it lands
		srv = restart(srv, "create-from-snapshot")
		res := wait()
		if snapshotRecords(t, srv)[snapID].State != client.SnapshotReady {
			t.Fatalf("after a kill during create-from-snapshot snapshot %s is not READY", snapID)
		}
		active := activeJob(t, srv, "orders")
		what := "no job"
		if active != nil {
			what = fmt.Sprint(active["state"])
			if active["created_from_snapshot_id"] != snapID {
				t.Fatalf("the active job of orders is not from snapshot %s: %v", snapID, active)
			}
			id := active["id"].(string)
			srv.waitJob(id, "RUNNING after the restart", stateIs("RUNNING"))
			if i < points-1 {
				// Start over: cancel it (rows it wrote lose to the next
				// job's higher generation).
				if r := srv.cli(work, "jobs", "cancel", id); r.code != ExitOK {
					t.Fatalf("cancel: %d %s", r.code, r.stderr)
				}
				srv.waitJob(id, "CANCELLED", stateIs("CANCELLED"))
			} else {
				v2 = id
			}
		}
		outcomes["create-from-snapshot"] = append(outcomes["create-from-snapshot"], fmt.Sprintf("cli exit %d, %s", res.code, what))
	}
	if v2 == "" {
		r := srv.cli(work, "run", pipeline, "--job-name", "orders", "--create-from-snapshot", snapID)
		if r.code != ExitOK {
			t.Fatalf("run --create-from-snapshot: %d %s", r.code, r.stderr)
		}
		v2 = strings.TrimSpace(r.stdout)
	}
	srv.waitJob(v2, "RUNNING", stateIs("RUNNING"))
	for op, o := range outcomes {
		t.Logf("%s: %s", op, strings.Join(o, "; "))
	}

	// The rest of the stream, then drain and compare with the truth.
	publish(srv, next, next+2000)
	waitCaughtUp(t, srv, v2)
	drainAndCheckTotals(t, srv, work, v2, db, want, wantN)
	srv.stop(syscall.SIGTERM)
}

func statesOf(recs map[string]client.Snapshot) []string {
	var out []string
	for _, s := range recs {
		out = append(out, string(s.State))
	}
	return out
}

func lastField(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}

// waitFor polls cond for up to 30 s.
func waitFor(t *testing.T, srv *serverProc, what string, cond func() bool) {
	t.Helper()
	if !await.Until(30*time.Second, 20*time.Millisecond, cond) {
		t.Fatalf("timed out waiting for %s\nserver log:\n%s", what, srv.log())
	}
}

// activeJob returns the record of the active (not terminal) job of name,
// or nil.
func activeJob(t *testing.T, srv *serverProc, name string) map[string]any {
	t.Helper()
	r := srv.cli("", "jobs", "list", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("jobs list: %d %s", r.code, r.stderr)
	}
	var jobs []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &jobs); err != nil {
		t.Fatalf("jobs list: %v\n%s", err, r.stdout)
	}
	for _, j := range jobs {
		switch j["state"] {
		case "RUNNING", "PENDING", "DRAINING", "QUEUED":
			if j["name"] == name {
				return srv.describe(j["id"].(string))
			}
		}
	}
	return nil
}
