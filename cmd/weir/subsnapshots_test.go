package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCLISubscriptionSnapshotsSeek drives a real `weir server` through the
// CLI: a subscription snapshot, seeks to it and to times (every step's
// acknowledgement state checked by what a pull returns), a topic
// mismatch, a seek refused under a running job (SUBSCRIPTION_IN_USE naming
// it) and forced, and the snapshot's deletion with its topic.
func TestCLISubscriptionSnapshotsSeek(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	work := t.TempDir()
	orders := filepath.Join(work, "orders.jsonl")
	if err := os.WriteFile(orders, []byte(orderLines(0, 5)), 0o644); err != nil {
		t.Fatal(err)
	}
	pipeline := filepath.Join(work, "orders.yaml")
	if err := os.WriteFile(pipeline, []byte(ordersPipeline("orders-job", filepath.Join(work, "orders.db"))), 0o644); err != nil {
		t.Fatal(err)
	}
	steps := []cliCase{
		{name: "topic", args: []string{"topics", "create", "orders"}},
		{name: "other topic", args: []string{"topics", "create", "clicks"}},
		{name: "subscription", args: []string{"subscriptions", "create", "peek", "--topic", "orders", "--from-beginning"}},
		{name: "job's subscription", args: []string{"subscriptions", "create", "orders-job", "--topic", "orders", "--from-beginning"}},
		{name: "other topic's subscription", args: []string{"subscriptions", "create", "clicks-sub", "--topic", "clicks"}},
		{name: "publish", args: []string{"topics", "publish", "orders", "--file", orders}, wantStdout: []string{"Published 5 messages"}},
		{name: "pull three", args: []string{"subscriptions", "pull", "peek", "--max", "3", "--auto-ack"}, wantStdout: []string{"3 messages from subscription peek, acknowledged."}},
		{name: "snapshot", args: []string{"subscriptions", "snapshots", "create", "after-three", "--subscription", "peek"},
			wantStdout: []string{"Created snapshot after-three of subscription peek (topic orders): acknowledged up to sequence 3; expires "}},
		{name: "snapshot, name taken", args: []string{"subscriptions", "snapshots", "create", "after-three", "--subscription", "peek"}, wantCode: ExitFailure,
			wantStderr: []string{"(SUBSCRIPTION_SNAPSHOT_EXISTS)"}},
		{name: "snapshot without --subscription", args: []string{"subscriptions", "snapshots", "create", "x"}, wantCode: ExitUsage, wantStderr: []string{"--subscription"}},
		{name: "snapshot of a missing subscription", args: []string{"subscriptions", "snapshots", "create", "x", "--subscription", "nope"}, wantCode: ExitFailure,
			wantStderr: []string{"(SUBSCRIPTION_NOT_FOUND)"}},
		{name: "describe", args: []string{"subscriptions", "snapshots", "describe", "after-three"}, wantStdout: []string{"Acknowledged up to:", "sequence 3", "Expire time:"}},
		{name: "list", args: []string{"subscriptions", "snapshots", "list", "--topic", "orders"}, wantStdout: []string{"NAME", "ACK_FLOOR", "after-three", "peek"}},
		{name: "list, JSON", args: []string{"subscriptions", "snapshots", "list", "--format", "json"}, wantStdout: []string{`"ack_floor": 3`}},
		{name: "pull the rest", args: []string{"subscriptions", "pull", "peek", "--auto-ack"}, wantStdout: []string{"2 messages from subscription peek, acknowledged."}},
		{name: "seek to the snapshot", args: []string{"subscriptions", "seek", "peek", "--snapshot", "after-three"},
			wantStdout: []string{"Sought subscription peek (topic orders) to snapshot after-three: acknowledged up to sequence 3, 2 messages unacknowledged."}},
		{name: "the two after it again", args: []string{"subscriptions", "pull", "peek", "--max", "10", "--auto-ack"}, wantStdout: []string{"sequence 4", "sequence 5", "2 messages from subscription peek"}},
		{name: "seek to long ago", args: []string{"subscriptions", "seek", "peek", "--time", "2000-01-01T00:00:00Z", "--format", "json"}, wantStdout: []string{`"ack_floor": 0`, `"backlog": 5`}},
		{name: "seek to the future", args: []string{"subscriptions", "seek", "peek", "--time", "2999-01-01T00:00:00Z"}, wantStdout: []string{"acknowledged up to sequence 5, 0 messages unacknowledged."}},
		{name: "seek across topics", args: []string{"subscriptions", "seek", "clicks-sub", "--snapshot", "after-three"}, wantCode: ExitUsage,
			wantStderr: []string{"(SNAPSHOT_TOPIC_MISMATCH)", "topic orders"}},
		{name: "seek to a missing snapshot", args: []string{"subscriptions", "seek", "peek", "--snapshot", "nope"}, wantCode: ExitFailure,
			wantStderr: []string{"(SUBSCRIPTION_SNAPSHOT_NOT_FOUND)"}},
		{name: "seek with both", args: []string{"subscriptions", "seek", "peek", "--snapshot", "after-three", "--time", "2000-01-01T00:00:00Z"}, wantCode: ExitUsage,
			wantStderr: []string{"exactly one of --snapshot"}},
		{name: "seek to a bad time", args: []string{"subscriptions", "seek", "peek", "--time", "yesterday"}, wantCode: ExitUsage, wantStderr: []string{"RFC 3339"}},
	}
	for _, st := range steps {
		st.check(t, srv.cli(work, st.args...))
	}

	r := srv.cli(work, "run", pipeline, "--job-name", "orders-sink")
	if r.code != ExitOK {
		t.Fatalf("run: exit %d\n%s\nserver log:\n%s", r.code, r.stderr, srv.log())
	}
	srv.waitJob("orders-sink", "RUNNING", stateIs("RUNNING"))
	for _, st := range []cliCase{
		{name: "seek under a running job", args: []string{"subscriptions", "seek", "orders-job", "--time", "2000-01-01T00:00:00Z"}, wantCode: ExitFailure,
			wantStderr: []string{"(SUBSCRIPTION_IN_USE)", "orders-sink", "watermark", "exactly-once", "force"}},
		{name: "seek under it, forced", args: []string{"subscriptions", "seek", "orders-job", "--time", "2999-01-01T00:00:00Z", "--force"}, wantStdout: []string{"Sought subscription orders-job"}},
		{name: "delete the snapshot", args: []string{"subscriptions", "snapshots", "delete", "after-three"}, wantStdout: []string{"Deleted subscription snapshot after-three."}},
		{name: "delete it again", args: []string{"subscriptions", "snapshots", "delete", "after-three"}, wantCode: ExitFailure, wantStderr: []string{"(SUBSCRIPTION_SNAPSHOT_NOT_FOUND)"}},
		{name: "snapshot of clicks", args: []string{"subscriptions", "snapshots", "create", "clicks-snap", "--subscription", "clicks-sub"}},
		{name: "delete clicks", args: []string{"topics", "delete", "clicks"}},
		{name: "its snapshots went with it", args: []string{"subscriptions", "snapshots", "describe", "clicks-snap"}, wantCode: ExitFailure, wantStderr: []string{"(SUBSCRIPTION_SNAPSHOT_NOT_FOUND)"}},
	} {
		st.check(t, srv.cli(work, st.args...))
	}
}
