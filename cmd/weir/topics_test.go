package main

import (
	"bytes"
	"database/sql"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	_ "modernc.org/sqlite"
)

// runCLIStdin runs the CLI with args in dir, stdin fed from in.
func runCLIStdin(t *testing.T, dir, in string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(mustExe(t), args...)
	cmd.Env = append(os.Environ(), runAsCLIEnv+"=1")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running weir %v: %v", args, err)
	}
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// ordersPipeline reads subscription sub as JSON orders and appends them to
// the SQLite table orders in db.
func ordersPipeline(sub, db string) string {
	return `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: ReadOrders
      config:
        subscription: ` + sub + `
        schema: {order_id: string, region: string, amount: int}
        id_field: order_id
    - type: WriteToSql
      name: WriteOrders
      input: ReadOrders
      config: {table: orders, mode: append, dsn: "` + db + `"}
`
}

// orderLines are JSON lines of orders o<first>..o<first+n-1>.
func orderLines(first, n int) string {
	var b strings.Builder
	regions := []string{"NORTH", "WEST"}
	for i := first; i < first+n; i++ {
		b.WriteString(`{"order_id": "o` + strconv.Itoa(i) + `", "region": "` + regions[i%2] + `", "amount": ` + strconv.Itoa(10*i) + "}\n")
	}
	return b.String()
}

// TestCLITopicsSubscriptionsPipeline drives a real `weir server` through
// the CLI: topics and subscriptions (create, list, describe, errors),
// publishing a JSON lines file with --attribute and --id-field (and stdin),
// pulling, a ReadFromPubSub → WriteToSql job reading a subscription, `weir
// check JOB_NAME NEW.yaml` against it, drain, and the SQLite table.
func TestCLITopicsSubscriptionsPipeline(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	work := t.TempDir()
	db := filepath.Join(work, "orders.db")
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(work, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	orders := write("orders.jsonl", orderLines(0, 5)+"\n") // a trailing blank line is skipped
	badLine := write("bad.jsonl", orderLines(100, 1)+"{not json\n")
	noID := write("noid.jsonl", `{"region": "NORTH"}`+"\n")
	reused := write("reused.jsonl", strings.Replace(orderLines(1, 1), `"amount": 10`, `"amount": 11`, 1)) // o1 with another amount
	pipeline := write("orders.yaml", ordersPipeline("orders-job", db))
	same := write("same.yaml", strings.Replace(ordersPipeline("orders-job", db), "id_field: order_id", "id_field: order_id\n        dedupe_window: 1h", 1))
	otherSub := write("other-sub.yaml", ordersPipeline("orders-peek", db))

	steps := []cliCase{
		{name: "create topic", args: []string{"topics", "create", "orders", "--retention", "48h"}, wantStdout: []string{"Created topic orders (retention 48h0m0s)."}},
		{name: "create topic twice", args: []string{"topics", "create", "orders"}, wantCode: ExitFailure, wantStderr: []string{"already exists", "(TOPIC_EXISTS)"}},
		{name: "create topic, bad name", args: []string{"topics", "create", "or*ders"}, wantCode: ExitUsage, wantStderr: []string{"(INVALID_NAME)"}},
		{name: "create topic, bad retention", args: []string{"topics", "create", "x", "--retention", "0s"}, wantCode: ExitUsage, wantStderr: []string{"--retention"}},
		{name: "create topic, JSON", args: []string{"topics", "create", "clicks", "--format", "json"}, wantStdout: []string{`"name": "clicks"`, `"retention": "168h0m0s"`}},
		{name: "list topics", args: []string{"topics", "list"}, wantStdout: []string{"NAME", "RETENTION", "clicks", "orders", "48h0m0s"}},
		{name: "subscription without --topic", args: []string{"subscriptions", "create", "s"}, wantCode: ExitUsage, wantStderr: []string{"--topic"}},
		{name: "subscription of a missing topic", args: []string{"subscriptions", "create", "s", "--topic", "nope"}, wantCode: ExitFailure, wantStderr: []string{"(TOPIC_NOT_FOUND)"}},
		{name: "subscription for people", args: []string{"subscriptions", "create", "orders-peek", "--topic", "orders", "--from-beginning", "--ack-deadline", "60"},
			wantStdout: []string{"Created subscription orders-peek on topic orders (ack wait 1m0s, from the beginning: 0 messages pending)."}},
		{name: "subscription for the job", args: []string{"subscriptions", "create", "orders-job", "--topic", "orders", "--ack-wait", "30s", "--from-beginning", "--format", "json"},
			wantStdout: []string{`"name": "orders-job"`, `"ack_wait": "30s"`}},
		{name: "subscription name taken", args: []string{"subscriptions", "create", "orders-job", "--topic", "clicks"}, wantCode: ExitFailure, wantStderr: []string{"(SUBSCRIPTION_EXISTS)"}},
		{name: "publish a file", args: []string{"topics", "publish", "orders", "--file", orders, "--attribute", "source=cli", "--attribute", "batch=1", "--id-field", "order_id"},
			wantStdout: []string{"Published 5 messages to topic orders (0 duplicates)."}},
		{name: "publish it again", args: []string{"topics", "publish", "orders", "--file", orders, "--id-field", "order_id", "--format", "json"},
			wantStdout: []string{`"published": 0`, `"duplicates": 5`}},
		{name: "an ID reused for other content", args: []string{"topics", "publish", "orders", "--file", reused, "--id-field", "order_id", "--format", "json"},
			wantStdout: []string{`"published": 0`, `"duplicates": 1`, `"id_conflicts": 1`}, wantStderr: []string{"1 message of the duplicates reused an ID the topic stores with other content"}},
		{name: "publish a bad line", args: []string{"topics", "publish", "orders", "--file", badLine, "--id-field", "order_id"}, wantCode: ExitFailure,
			wantStderr: []string{"bad.jsonl:2: the line is not valid JSON; 1 message was published before it"}},
		{name: "publish without the ID field", args: []string{"topics", "publish", "orders", "--file", noID, "--id-field", "order_id"}, wantCode: ExitFailure,
			wantStderr: []string{`noid.jsonl:1: --id-field order_id: the object has no field "order_id"`}},
		{name: "publish, bad attribute", args: []string{"topics", "publish", "orders", "--file", orders, "--attribute", "source"}, wantCode: ExitUsage, wantStderr: []string{"--attribute"}},
		{name: "publish, reserved attribute", args: []string{"topics", "publish", "orders", "--file", orders, "--attribute", "Nats-Msg-Id=x"}, wantCode: ExitUsage,
			wantStderr: []string{"(INVALID_NAME)"}},
		{name: "publish to a missing topic", args: []string{"topics", "publish", "nope", "--file", orders}, wantCode: ExitFailure, wantStderr: []string{"(TOPIC_NOT_FOUND)"}},
		{name: "publish a missing file", args: []string{"topics", "publish", "orders", "--file", filepath.Join(work, "none.jsonl")}, wantCode: ExitFailure, wantStderr: []string{"none.jsonl"}},
		{name: "describe topic", args: []string{"topics", "describe", "orders"}, wantStdout: []string{"Messages:", "sequences 1..6", "Retention:", "48h0m0s"}},
		{name: "pull, JSON, without ack", args: []string{"subscriptions", "pull", "orders-peek", "--max", "2", "--format", "json"},
			wantStdout: []string{`"data": "{\"order_id\": \"o0\", \"region\": \"NORTH\", \"amount\": 0}"`, `"id": "o0"`, `"source": "cli"`, `"batch": "1"`, `"sequence": 2`}},
		{name: "pull", args: []string{"subscriptions", "pull", "orders-peek", "--max", "3", "--auto-ack"},
			wantStdout: []string{"sequence 3  published ", "  id o2  attributes batch=1 source=cli\n  {\"order_id\": \"o2\"", "sequence 5", "3 messages from subscription orders-peek, acknowledged."}},
		{name: "pull the rest", args: []string{"subscriptions", "pull", "orders-peek", "--limit", "10", "--auto-ack"}, wantStdout: []string{"sequence 6", "  id o100\n  {\"order_id\": \"o100\"", "1 message from subscription orders-peek, acknowledged."}},
		{name: "pull, nothing left", args: []string{"subscriptions", "pull", "orders-peek"}, wantStdout: []string{"No messages available in subscription orders-peek."}},
		{name: "pull, bad max", args: []string{"subscriptions", "pull", "orders-peek", "--max", "0"}, wantCode: ExitUsage, wantStderr: []string{"--max"}},
		{name: "pull, missing subscription", args: []string{"subscriptions", "pull", "nope"}, wantCode: ExitFailure, wantStderr: []string{"(SUBSCRIPTION_NOT_FOUND)"}},
		{name: "list subscriptions", args: []string{"subscriptions", "list", "--topic", "orders"}, wantStdout: []string{"NAME", "BACKLOG", "orders-job", "orders-peek"}},
		{name: "list subscriptions, JSON", args: []string{"subscriptions", "list", "--format", "json"}, wantStdout: []string{`"name": "orders-job",
    "topic": "orders",
    "num_pending": 6`}},
		{name: "describe subscription", args: []string{"subscriptions", "describe", "orders-peek"}, wantStdout: []string{"Acknowledged up to:", "sequence 6"}},
	}
	for _, st := range steps {
		st.check(t, srv.cli(work, st.args...))
	}
	if m := scrapeMetrics(t, srv.url); !strings.Contains(m, `weir_topic_duplicate_id_conflicts_total{topic="orders"} 1`) {
		t.Errorf("/metrics lacks the reused ID of topic orders:\n%s", m)
	}

	// The job reads the subscription from its beginning: the 5 orders and
	// o100 (published before the bad line stopped the command).
	r := srv.cli(work, "run", pipeline, "--job-name", "orders-sink")
	if r.code != ExitOK {
		t.Fatalf("run: exit %d\n%s\nserver log:\n%s", r.code, r.stderr, srv.log())
	}
	srv.waitJob("orders-sink", "6 orders read", func(m map[string]any) bool { return stepIn(m, "WriteOrders") >= 6 })

	// Published while the job runs, from stdin.
	sr := runCLIStdin(t, work, orderLines(5, 2), "topics", "publish", "orders", "--id-field", "order_id", "--attribute", "source=stdin", "--server", srv.url)
	cliCase{args: []string{"topics", "publish", "(stdin)"}, wantStdout: []string{"Published 2 messages"}}.check(t, sr)
	srv.waitJob("orders-sink", "8 orders read", func(m map[string]any) bool { return stepIn(m, "WriteOrders") >= 8 })

	// weir check against the running job's stored graph.
	checks := []cliCase{
		{name: "check, compatible", args: []string{"check", "orders-sink", same}, wantStdout: []string{"compatible:"}},
		{name: "check, compatible, JSON", args: []string{"check", "orders-sink", same, "--format", "json"}, wantStdout: []string{`"compatible": true`}},
		{name: "check, another subscription", args: []string{"check", "orders-sink", otherSub}, wantCode: ExitIncompatible,
			wantStdout: []string{"error SOURCE_CHANGED: ReadOrders", "subscription/orders-peek"}, wantStderr: []string{"cannot update orders-sink"}},
		{name: "check, another subscription allowed", args: []string{"check", "--allow-source-change", "orders-sink", otherSub}, wantStdout: []string{"warning SOURCE_POSITIONS_DROPPED: ReadOrders"}},
		{name: "check, unknown job", args: []string{"check", "no-such-job", same}, wantCode: ExitFailure, wantStderr: []string{"(JOB_NOT_FOUND)"}},
		{name: "check, invalid new pipeline", args: []string{"check", "orders-sink", testdata(t, "unknown_type.yaml")}, wantCode: ExitInvalidPipeline, wantStderr: []string{"Frobnicate"}},
	}
	for _, c := range checks {
		c.check(t, srv.cli(work, c.args...))
	}

	r = srv.cli(work, "jobs", "drain", "orders-sink")
	if r.code != ExitOK {
		t.Fatalf("drain: exit %d\n%s", r.code, r.stderr)
	}
	srv.waitJob("orders-sink", "DRAINED", func(m map[string]any) bool { return m["state"] == "DRAINED" && m["pending_commit"] == nil })

	conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var rows, distinct, total int64
	if err := conn.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT order_id), SUM(amount) FROM orders`).Scan(&rows, &distinct, &total); err != nil {
		t.Fatal(err)
	}
	// o0..o6 and o100: amounts 10*i.
	if rows != 8 || distinct != 8 || total != 10*(0+1+2+3+4+5+6+100) {
		t.Errorf("table orders holds %d rows (%d distinct orders), total %d; want 8 distinct orders totalling %d", rows, distinct, total, 10*(0+1+2+3+4+5+6+100))
	}

	after := []cliCase{
		{name: "check a drained job", args: []string{"check", "orders-sink", same}, wantCode: ExitFailure, wantStderr: []string{"job orders-sink is not running", "DRAINED"}},
		{name: "the job acknowledged everything", args: []string{"subscriptions", "describe", "orders-job", "--format", "json"}, wantStdout: []string{`"backlog": 0`, `"ack_floor": 8`}},
		{name: "delete subscription", args: []string{"subscriptions", "delete", "orders-peek"}, wantStdout: []string{"Deleted subscription orders-peek."}},
		{name: "delete it again", args: []string{"subscriptions", "delete", "orders-peek"}, wantCode: ExitFailure, wantStderr: []string{"(SUBSCRIPTION_NOT_FOUND)"}},
		{name: "delete topic", args: []string{"topics", "delete", "orders"}, wantStdout: []string{"Deleted topic orders."}},
		{name: "its subscriptions went with it", args: []string{"subscriptions", "list", "--format", "json"}, wantStdout: []string{"[]"}},
		{name: "delete topic again", args: []string{"topics", "delete", "orders"}, wantCode: ExitFailure, wantStderr: []string{"(TOPIC_NOT_FOUND)"}},
	}
	for _, c := range after {
		c.check(t, srv.cli(work, c.args...))
	}
	if code := srv.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("server exit code %d", code)
	}
}

// TestCLITopicsUnreachable: every topic and subscription command, and
// `weir check JOB_NAME`, exit 5 when no server answers.
func TestCLITopicsUnreachable(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "new.yaml")
	if err := os.WriteFile(p, []byte(ordersPipeline("s", filepath.Join(dir, "x.db"))), 0o644); err != nil {
		t.Fatal(err)
	}
	const dead = "http://127.0.0.1:1"
	var cases []cliCase
	for _, args := range [][]string{
		{"topics", "create", "t"}, {"topics", "list"}, {"topics", "describe", "t"}, {"topics", "delete", "t"},
		{"subscriptions", "create", "s", "--topic", "t"}, {"subscriptions", "list"}, {"subscriptions", "describe", "s"},
		{"subscriptions", "delete", "s"}, {"subscriptions", "pull", "s"}, {"check", "orders-sink", p},
	} {
		cases = append(cases, cliCase{name: strings.Join(args[:2], " "), args: append(args, "--server", dead), wantCode: ExitServerUnreachable,
			wantStderr: []string{"no weir server answers at " + dead}})
	}
	cases = append(cases,
		cliCase{name: "unknown topics command", args: []string{"topics", "purge"}, wantCode: ExitUsage, wantStderr: []string{"unknown topics command", "publish"}},
		cliCase{name: "unknown subscriptions command", args: []string{"subscriptions", "purge"}, wantCode: ExitUsage, wantStderr: []string{"unknown subscriptions command", "pull", "seek", "snapshots"}})
	runCases(t, dir, cases)
	r := runCLIStdin(t, dir, orderLines(0, 1), "topics", "publish", "t", "--server", dead)
	cliCase{args: []string{"topics", "publish"}, wantCode: ExitServerUnreachable}.check(t, r)
}

// scrapeMetrics returns the text of GET /metrics of the server at base.
func scrapeMetrics(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}
