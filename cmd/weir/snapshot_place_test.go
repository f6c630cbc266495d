package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLICreateFromSnapshotSources drives two real `weir server`s through
// the CLI (issue 22 items 3 and 4): a snapshot of a job reading a topic
// starts a job under another name on the same server (RUNNING, reading
// its own subscription from the snapshot's position, said on stderr);
// exported and imported on the second server (another broker), it is
// refused with SNAPSHOT_FOREIGN_POSITIONS and creates nothing, then with
// --source-positions from-publish-time starts a job whose --format json
// answer says how its source was placed. The snapshot describes its
// broker.
func TestCLICreateFromSnapshotSources(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts servers")
	}
	work := t.TempDir()
	yaml := func(db string) string {
		return `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Orders
      config: {topic: orders, schema: {key: string, amount: int}}
    - type: Combine
      name: Totals
      input: Orders
      config:
        group_by: key
        combine: {total: {value: amount, fn: sum}}
    - type: WriteToSql
      name: Write
      input: Totals
      config: {dsn: "` + db + `", table: totals, key: [key]}
`
	}
	pipeline := func(name string) string {
		return writeTestFile(t, work, name+".yaml", yaml(filepath.Join(work, name+".db")))
	}
	publish := func(srv *serverProc, from, to int) {
		t.Helper()
		var b strings.Builder
		for i := from; i < to; i++ {
			fmt.Fprintf(&b, `{"key": "k%d", "amount": %d, "id": %d}`+"\n", i%3, i, i)
		}
		path := writeTestFile(t, work, fmt.Sprintf("chunk-%d.jsonl", from), b.String())
		srv.publish(t, work, path)
	}

	a := startServer(t, t.TempDir())
	a.mustCLI(t, work, "topics", "create", "orders")
	a.mustCLI(t, work, "run", pipeline("totals"), "--job-name", "totals")
	publish(a, 0, 30)
	a.waitJob("totals", "30 messages read", func(m map[string]any) bool {
		r := a.cli(work, "subscriptions", "describe", "totals--Orders", "--format", "json")
		var sub map[string]any
		return r.code == ExitOK && json.Unmarshal([]byte(r.stdout), &sub) == nil && sub["ack_floor"] == float64(30)
	})
	r := a.mustCLI(t, work, "snapshots", "create", "--job-id", "totals", "--wait", "--format", "json")
	var snap map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &snap); err != nil {
		t.Fatal(err)
	}
	id, _ := snap["id"].(string)
	if b, _ := snap["broker"].(map[string]any); b == nil || b["id"] == "" {
		t.Fatalf("the snapshot does not say whose positions it holds: %v", snap)
	}
	r = a.mustCLI(t, work, "snapshots", "describe", id)
	if !strings.Contains(r.stdout, "Broker") || !strings.Contains(r.stdout, "totals--Orders") {
		t.Errorf("describe does not show the snapshot's broker:\n%s", r.stdout)
	}

	// Another name on the same server: its own subscription, at the
	// snapshot's position.
	r = a.mustCLI(t, work, "run", pipeline("other"), "--job-name", "other", "--create-from-snapshot", id)
	if !strings.Contains(r.stderr, "other--Orders") || !strings.Contains(r.stderr, "sequence 31") {
		t.Errorf("run --create-from-snapshot does not say where the source starts:\n%s", r.stderr)
	}
	m := a.waitJob("other", "RUNNING", stateIs("RUNNING"))
	if m["state"] != "RUNNING" {
		t.Fatalf("the job from the snapshot under another name: %v", m["state"])
	}

	file := filepath.Join(work, "snap.weirsnap")
	a.mustCLI(t, work, "snapshots", "export", id, "--output", file)
	b := startServer(t, t.TempDir())
	b.mustCLI(t, work, "topics", "create", "orders")
	publish(b, 100, 105)
	b.mustCLI(t, work, "snapshots", "import", file)
	r = b.cli(work, "run", pipeline("moved"), "--job-name", "moved", "--create-from-snapshot", id)
	cliCase{wantCode: ExitFailure, wantStderr: []string{"SNAPSHOT_FOREIGN_POSITIONS", "--source-positions from-publish-time"}}.check(t, r)
	if r := b.cli(work, "jobs", "describe", "moved"); r.code == ExitOK {
		t.Fatalf("a refused create-from-snapshot created a job:\n%s", r.stdout)
	}
	r = b.mustCLI(t, work, "run", pipeline("moved"), "--job-name", "moved", "--create-from-snapshot", id,
		"--source-positions", "from-publish-time", "--format", "json")
	var out struct {
		ID              string `json:"id"`
		SourcePositions []struct {
			Step, Subscription, Translation string
			StartSeq                        uint64 `json:"start_seq"`
		} `json:"source_positions"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if out.ID == "" || len(out.SourcePositions) != 1 || out.SourcePositions[0].Subscription != "moved--Orders" ||
		out.SourcePositions[0].Translation != "from-publish-time" || out.SourcePositions[0].StartSeq != 1 {
		t.Fatalf("--format json: %s", r.stdout)
	}
	b.waitJob("moved", "RUNNING", stateIs("RUNNING"))
}
