package yamlpipe

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/state"
)

const pubsubPipeline = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Orders
      config:
        topic: orders
        schema: {region: string, amount: int, ts: timestamp}
        timestamp_field: ts
        id_field: id_unused_placeholder
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
`

// TestPubSubToSQLExactlyOnceAcrossCrash runs ReadFromPubSub → windowed
// Combine → WriteToSql with checkpoints into a real state store, "crashes"
// (cancel: everything after the last durable checkpoint is lost, and the
// subscription redelivers what was not acknowledged), restores from the
// store, drains, and checks that the table holds exactly the ground truth.
func TestPubSubToSQLExactlyOnceAcrossCrash(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := ordersBroker(t, dir)
	store, err := state.Open(filepath.Join(dir, "state"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	db := filepath.Join(dir, "out.sqlite")
	src := fmt.Sprintf(pubsubPipeline, db)
	src = replaceOnce(src, "        id_field: id_unused_placeholder\n", "")
	job := &JobEnv{Name: "orders-job", ID: "job-1", Generation: 1, DataDir: dir, Broker: b}
	load := func() *contract.Program {
		p, err := Load("p.yaml", []byte(src), Options{BaseDir: dir, Job: job})
		if err != nil {
			t.Fatal(err)
		}
		return p.Program()
	}

	// The subscription is created on the first load; publish after it so
	// every message is delivered (a new subscription starts at the end).
	prog := load()
	x, err := runner.Start(ctx, prog, runner.Options{NumWorkers: 2, Checkpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			region := []string{"NORTH", "WEST", "EAST"}[i%3]
			ts := base.Add(time.Duration(i) * time.Second).Format(time.RFC3339)
			msg := fmt.Sprintf(`{"region": %q, "amount": %d, "ts": %q}`, region, i, ts)
			if _, err := b.Publish(ctx, "orders", []byte(msg), nil, ""); err != nil {
				t.Fatal(err)
			}
			want[region] += int64(i)
		}
	}
	checkpoint := func(x *runner.Execution) {
		cp, err := x.Checkpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.WriteCheckpoint(job.Name, job.ID, cp, nil); err != nil {
			t.Fatal(err)
		}
		if err := x.Commit(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	// read waits until x's combine has taken in n elements: the job has
	// read what was published.
	read := func(x *runner.Execution, n int64) {
		t.Helper()
		if !await.Until(30*time.Second, 5*time.Millisecond, func() bool { return x.Metrics().Step("Totals").ElementsIn >= n }) {
			t.Fatalf("the job read %d elements, want %d", x.Metrics().Step("Totals").ElementsIn, n)
		}
	}
	// The split creates the subscription (named after the job and step)
	// when it opens; it starts at the end of the topic.
	sub := pubsub.SubscriptionName(job.Name, "Orders")
	if !await.Until(30*time.Second, 5*time.Millisecond, func() bool { _, err := b.Subscription(ctx, sub); return err == nil }) {
		t.Fatalf("the split did not create subscription %s", sub)
	}
	publish(0, 400)
	read(x, 400)
	checkpoint(x)
	publish(400, 700)
	read(x, 700)
	x.Cancel() // crash: what came after the checkpoint is lost
	x.Wait()

	prog = load()
	rs, last, err := store.Restore(job.Name, job.ID)
	if err != nil || rs == nil {
		t.Fatalf("restore: %v", err)
	}
	if err := runner.CommitRestored(ctx, prog, last); err != nil {
		t.Fatal(err)
	}
	x, err = runner.Start(ctx, prog, runner.Options{NumWorkers: 2, Checkpoints: true, Restore: rs})
	if err != nil {
		t.Fatal(err)
	}
	publish(700, 900)
	read(x, 500) // from the checkpoint (400) on: 300 read again, 200 new
	checkpoint(x)
	x.Drain()
	if _, err := x.Wait(); err != nil {
		t.Fatal(err)
	}
	checkpoint(x) // the final checkpoint commits what the drain flushed
	if err := x.CloseSinks(ctx); err != nil {
		t.Fatal(err)
	}

	got, count := regionTotals(t, db)
	for r, w := range want {
		if got[r] != w {
			t.Errorf("%s: table total %d, want %d", r, got[r], w)
		}
	}
	if count != 900 {
		t.Errorf("table counts %d elements, want 900 (each exactly once)", count)
	}
}

func replaceOnce(s, old, new string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + new + s[i+len(old):]
		}
	}
	return s
}

// ordersBroker starts an embedded broker in dir/broker with the topic
// "orders", stopped when the test ends.
func ordersBroker(t *testing.T, dir string) *pubsub.Broker {
	t.Helper()
	ctx := context.Background()
	b, err := pubsub.StartEmbedded(ctx, pubsub.Options{StoreDir: filepath.Join(dir, "broker"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Shutdown(ctx) })
	if _, err := b.CreateTopic(ctx, "orders", pubsub.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	return b
}

// regionTotals reads the SQLite table totals of db: each region's summed
// total, and the count of elements over all rows.
func regionTotals(t *testing.T, db string) (map[string]int64, int64) {
	t.Helper()
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT region, SUM(total), SUM(n) FROM totals GROUP BY region`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int64{}
	var count int64
	for rows.Next() {
		var region string
		var total, n int64
		if err := rows.Scan(&region, &total, &n); err != nil {
			t.Fatal(err)
		}
		got[region] = total
		count += n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got, count
}

// ReadFromPubSub's idle_timeout: absent or 0 is the default (5s), a
// duration is that, and never disables idle advancement, which a backfill
// of historical event times needs (issue 22 item 9: before, nothing
// disabled it and backfills needed idle_timeout: 24h).
func TestReadFromPubSubIdleTimeout(t *testing.T) {
	b := ordersBroker(t, t.TempDir())
	for _, tc := range []struct {
		value string // "" leaves the key out
		want  time.Duration
		err   string
	}{
		{"", pubsub.DefaultIdleTimeout, ""},
		{"0", pubsub.DefaultIdleTimeout, ""},
		{"30s", 30 * time.Second, ""},
		{"24h", 24 * time.Hour, ""},
		{"never", -1, ""},
		{"sometimes", 0, "f.yaml:5:58: bad idle_timeout (want a duration such as 5s or 24h, 0 for the default 5s, or never to disable idle advancement)"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			opt := ""
			if tc.value != "" {
				opt = ", idle_timeout: " + tc.value
			}
			src := "pipeline:\n  transforms:\n    - type: ReadFromPubSub\n      name: Orders\n      config: {topic: orders, format: raw" + opt + "}\n" +
				"    - type: LogForTesting\n      input: Orders\n"
			p, err := Load("f.yaml", []byte(src), Options{Job: &JobEnv{Name: "j", ID: "j-1", Generation: 1, Broker: b}, LogOutput: io.Discard})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			src2, ok := p.Program().Code["Orders"].(*pubsub.Source)
			if !ok {
				t.Fatalf("step Orders is a %T, not a *pubsub.Source", p.Program().Code["Orders"])
			}
			if got := src2.Config().Watermark.IdleTimeout; got != tc.want {
				t.Fatalf("IdleTimeout = %v, want %v", got, tc.want)
			}
		})
	}
}
