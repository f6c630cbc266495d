package yamlpipe

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
)

const keylessPipeline = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Orders
      config:
        topic: orders
        schema: {region: string, amount: int, ts: timestamp}
        timestamp_field: ts
        error_handling: {output: bad_input}
    - type: WriteToJson
      name: WriteBadInput
      input: Orders.bad_input
      config: {path: bad_input.jsonl}
    - type: Combine
      name: Totals
      input: Orders
      windowing: {type: fixed, size: 1m}
      config:
        group_by: [region]
        combine: {total: {value: amount, fn: sum}, n: {value: amount, fn: count}}
    - type: WriteToSql
      name: WriteTotals
      input: Totals
      config:
        dsn: %s
        table: totals
        key: [region]
        error_handling: {output: unstored}
    - type: WriteToJson
      name: WriteUnstored
      input: WriteTotals.unstored
      config: {path: unstored.jsonl}
`

// TestKeylessMessageIsASinkReject: 200 good messages, one without its
// group_by field, 100 more, through ReadFromPubSub → Combine → WriteToSql
// with checkpoints. Combine groups the null key as a key of its own; the
// sink cannot store its row (a null in the upsert key), which becomes a
// null_key reject of the sink step on its error output. Every good message
// is committed and the job goes on to drain.
func TestKeylessMessageIsASinkReject(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := ordersBroker(t, dir)
	db := filepath.Join(dir, "out.sqlite")
	job := &JobEnv{Name: "keyless-job", ID: "job-1", Generation: 1, DataDir: dir, Broker: b}
	p, err := Load("p.yaml", []byte(fmt.Sprintf(keylessPipeline, db)), Options{BaseDir: dir, Job: job})
	if err != nil {
		t.Fatal(err)
	}
	x, err := runner.Start(ctx, p.Program(), runner.Options{NumWorkers: 2, Checkpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	sub := pubsub.SubscriptionName(job.Name, "Orders")
	if !await.Until(30*time.Second, 5*time.Millisecond, func() bool { _, err := b.Subscription(ctx, sub); return err == nil }) {
		t.Fatalf("the split did not create subscription %s", sub)
	}
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	want := map[string]int64{}
	publish := func(msg string) {
		t.Helper()
		if _, err := b.Publish(ctx, "orders", []byte(msg), nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	good := func(from, to int) {
		for i := from; i < to; i++ {
			region := []string{"NORTH", "WEST", "EAST"}[i%3]
			publish(fmt.Sprintf(`{"region": %q, "amount": %d, "ts": %q}`, region, i, base.Add(time.Duration(i)*time.Second).Format(time.RFC3339)))
			want[region] += int64(i)
		}
	}
	good(0, 200)
	publish(fmt.Sprintf(`{"amount": 1000000, "ts": %q}`, base.Add(200*time.Second).Format(time.RFC3339)))
	good(201, 301)
	if !await.Until(30*time.Second, 5*time.Millisecond, func() bool { return x.Metrics().Step("Totals").ElementsIn >= 301 }) {
		t.Fatalf("the job read %d elements, want 301", x.Metrics().Step("Totals").ElementsIn)
	}
	checkpoint := func() {
		t.Helper()
		cp, err := x.Checkpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := x.Commit(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	checkpoint()
	x.Drain()
	res, err := x.Wait()
	if err != nil {
		t.Fatalf("the job failed: %v", err)
	}
	checkpoint()
	if err := x.CloseSinks(ctx); err != nil {
		t.Fatal(err)
	}

	got, count := regionTotals(t, db)
	for r, w := range want {
		if got[r] != w {
			t.Errorf("%s: table total %d, want %d", r, got[r], w)
		}
	}
	if count != 300 {
		t.Errorf("table counts %d elements, want the 300 good ones", count)
	}
	lines := readJSONLines(t, filepath.Join(dir, "unstored.jsonl"))
	if len(lines) != 1 {
		t.Fatalf("unstored.jsonl holds %d rows, want the keyless group's: %v", len(lines), lines)
	}
	e := lines[0]["error"].(map[string]any)
	if e["step"] != "WriteTotals" || e["reason"] != "null_key" {
		t.Errorf("reject %v, want step WriteTotals, reason null_key", lines[0])
	}
	if el, _ := lines[0]["element"].(map[string]any); el == nil || el["region"] != nil || el["total"] != float64(1000000) {
		t.Errorf("rejected element %v, want the null-key group with total 1000000", lines[0]["element"])
	}
	if m := res.Step("WriteTotals"); m.Rejects != 1 {
		t.Errorf("WriteTotals rejects %d, want 1", m.Rejects)
	}
	if bad := readJSONLines(t, filepath.Join(dir, "bad_input.jsonl")); len(bad) != 0 {
		t.Errorf("the source rejected %v; the keyless message is valid input", bad)
	}
}

func readJSONLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	b := readSinkOutput(t, path)
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, m)
	}
	return out
}

const keylessBounded = `pipeline:
  transforms:
    - type: Create
      name: In
      config:
        elements:
          - {region: NORTH, amount: 250}
          - {amount: 7}
          - {region: WEST, amount: 5}
    - type: WriteToSql
      name: WriteTotals
      input: In
      config:
        dsn: %s
        table: totals
        key: [region]
`

// TestKeylessRowWithoutErrorOutput: with no error output a sink's reject
// fails a bounded run naming the step, the reason and the source position,
// as any step's reject does; with a dead-letter hook the reject goes there
// and the run completes with the good rows stored.
func TestKeylessRowWithoutErrorOutput(t *testing.T) {
	dir := t.TempDir()
	src := fmt.Sprintf(keylessBounded, filepath.Join(dir, "a.sqlite"))
	err := runSrc(t, dir, src, 1)
	if err == nil {
		t.Fatal("run succeeded; want a failure")
	}
	for _, w := range []string{`"WriteTotals"`, "null_key", "p.yaml:8"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %s", err, w)
		}
	}

	db := filepath.Join(dir, "b.sqlite")
	p, err := Load("p.yaml", []byte(fmt.Sprintf(keylessBounded, db)), Options{BaseDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var dead []contract.Reject
	_, err = weir.Run(context.Background(), p, weir.RunOptions{DeadLetter: func(_ context.Context, r contract.Reject) error {
		mu.Lock()
		defer mu.Unlock()
		dead = append(dead, r)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].Step != "WriteTotals" || dead[0].Reason != "null_key" {
		t.Fatalf("dead letters %+v, want one null_key reject of WriteTotals", dead)
	}
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var n int
	if err := conn.QueryRow(`SELECT COUNT(*) FROM totals`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("table rows %d (%v), want the 2 good ones", n, err)
	}
}

const futurePipeline = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Orders
      config:
        topic: orders
        schema: {region: string, amount: int, ts: timestamp}
        timestamp_field: ts
        max_future_skew: 1h
        error_handling: {output: bad_input}
    - type: WriteToJson
      name: WriteBadInput
      input: Orders.bad_input
      config: {path: bad_input.jsonl}
    - type: Combine
      name: Totals
      input: Orders
      windowing: {type: fixed, size: 1m}
      config:
        group_by: [region]
        combine: {n: {value: amount, fn: count}}
    - type: WriteToJson
      name: WriteTotals
      input: Totals
      config: {path: totals.jsonl}
`

// TestFarFutureMessageDoesNotSilenceTheStream: a message stamped 2099
// between good ones is a timestamp_in_future reject on the source's error
// output; the good messages after it are not dropped as late.
func TestFarFutureMessageDoesNotSilenceTheStream(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := ordersBroker(t, dir)
	job := &JobEnv{Name: "future-job", ID: "job-1", Generation: 1, DataDir: dir, Broker: b}
	p, err := Load("p.yaml", []byte(futurePipeline), Options{BaseDir: dir, Job: job})
	if err != nil {
		t.Fatal(err)
	}
	x, err := runner.Start(ctx, p.Program(), runner.Options{NumWorkers: 2})
	if err != nil {
		t.Fatal(err)
	}
	sub := pubsub.SubscriptionName(job.Name, "Orders")
	if !await.Until(30*time.Second, 5*time.Millisecond, func() bool { _, err := b.Subscription(ctx, sub); return err == nil }) {
		t.Fatalf("the split did not create subscription %s", sub)
	}
	// Event times a minute ahead of the wall clock, well within the skew
	// (and ahead of the idle watermark).
	base := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	publish := func(ts time.Time) {
		t.Helper()
		msg := fmt.Sprintf(`{"region": "NORTH", "amount": 1, "ts": %q}`, ts.Format(time.RFC3339))
		if _, err := b.Publish(ctx, "orders", []byte(msg), nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		publish(base.Add(time.Duration(i) * time.Second))
	}
	publish(time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC))
	for i := 100; i < 200; i++ {
		publish(base.Add(time.Duration(i) * time.Second))
	}
	if !await.Until(30*time.Second, 5*time.Millisecond, func() bool { return x.Metrics().Step("Orders").ElementsIn >= 201 }) {
		t.Fatalf("the job read %d messages, want 201", x.Metrics().Step("Orders").ElementsIn)
	}
	x.Drain()
	res, err := x.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if err := x.CloseSinks(ctx); err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, r := range readJSONLines(t, filepath.Join(dir, "totals.jsonl")) {
		n += r["n"].(float64)
	}
	if n != 200 {
		t.Errorf("the windows counted %v messages, want the 200 good ones (dropped late: %d)", n, res.Step("Totals").DroppedLateElements)
	}
	bad := readJSONLines(t, filepath.Join(dir, "bad_input.jsonl"))
	if len(bad) != 1 || bad[0]["error"].(map[string]any)["reason"] != "timestamp_in_future" {
		t.Errorf("source rejects %v, want the 2099 message as timestamp_in_future", bad)
	}
}

// readSinkOutput returns what a file sink wrote at path: the file of a
// bounded run, or, when there is none, the committed part files of a
// streaming job (files.PartName) in name order.
func readSinkOutput(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ext := filepath.Ext(path)
	parts, err := filepath.Glob(strings.TrimSuffix(path, ext) + "-g*-e*-w*" + ext)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(parts)
	var out []byte
	for _, p := range parts {
		pb, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pb...)
	}
	return out
}
