package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/internal/await"
)

// TestSubscriptionSnapshotsAcrossAPIs: against a real `weir server`, a
// subscription snapshot made with Google's Go client (the Pub/Sub gRPC
// API) is listed, described and sought to with weir's CLI (HTTP API), and
// one made with the CLI is read and sought to through gRPC; a seek keeps
// the gRPC subscription's per-message acknowledgements.
func TestSubscriptionSnapshotsAcrossAPIs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir, work := t.TempDir(), t.TempDir()
	srv := startServer(t, dir)
	t.Setenv("PUBSUB_EMULATOR_HOST", srv.grpcAddr())
	ctx := context.Background()
	gcl, err := gpubsub.NewClient(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	defer gcl.Close()
	sc := gcl.SubscriptionAdminClient
	ok := func(args ...string) cliResult {
		t.Helper()
		r := srv.cli(work, args...)
		if r.code != ExitOK {
			t.Fatalf("weir %s: %d %s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return r
	}
	ok("topics", "create", "t")
	ok("subscriptions", "create", "w", "--topic", "t", "--from-beginning")
	if _, err := sc.CreateSubscription(ctx, &pubsubpb.Subscription{Name: "projects/p/subscriptions/g", Topic: "projects/p/topics/t"}); err != nil {
		t.Fatal(err)
	}
	publish := func(data ...string) {
		t.Helper()
		f := filepath.Join(work, "msgs.jsonl")
		if err := os.WriteFile(f, []byte(strings.Join(data, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		ok("topics", "publish", "t", "--file", f)
	}
	receive := func(n int) string {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var mu sync.Mutex
		var got []string
		err := gcl.Subscriber("g").Receive(rctx, func(_ context.Context, m *gpubsub.Message) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, string(m.Data))
			m.Ack()
			if len(got) >= n {
				cancel()
			}
		})
		if err != nil || len(got) < n {
			t.Fatalf("Receive: %v, got %v", err, got)
		}
		// The acknowledgements reach the broker before the next step.
		if !await.Until(20*time.Second, 10*time.Millisecond, func() bool {
			var info struct {
				Backlog *uint64 `json:"backlog"`
			}
			r := srv.cli(work, "subscriptions", "describe", "g", "--format", "json")
			return r.code == ExitOK && json.Unmarshal([]byte(r.stdout), &info) == nil && info.Backlog != nil && *info.Backlog == 0
		}) {
			t.Fatal("the gRPC subscription kept a backlog")
		}
		sort.Strings(got)
		return strings.Join(got, ",")
	}
	pull := func(sub string) string {
		t.Helper()
		var msgs []struct {
			Data string `json:"data"`
		}
		r := ok("subscriptions", "pull", sub, "--max", "100", "--format", "json", "--auto-ack")
		if err := json.Unmarshal([]byte(r.stdout), &msgs); err != nil {
			t.Fatalf("pull: %v\n%s", err, r.stdout)
		}
		var got []string
		for _, m := range msgs {
			got = append(got, string(m.Data))
		}
		sort.Strings(got)
		return strings.Join(got, ",")
	}
	publish(`"a"`, `"b"`)
	if got := receive(2); got != `"a","b"` {
		t.Fatalf("gRPC received %s", got)
	}
	if got := pull("w"); got != `"a","b"` {
		t.Fatalf("weir pulled %s", got)
	}

	// Made with Google's client: weir's CLI lists and describes it.
	if _, err := sc.CreateSnapshot(ctx, &pubsubpb.CreateSnapshotRequest{Name: "projects/p/snapshots/grpc-snap",
		Subscription: "projects/p/subscriptions/g", Labels: map[string]string{"team": "data"}}); err != nil {
		t.Fatalf("CreateSnapshot: %v", err)
	}
	var listed []client.SubscriptionSnapshot
	r := ok("subscriptions", "snapshots", "list", "--format", "json")
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || len(listed) != 1 || listed[0].Name != "grpc-snap" ||
		listed[0].Subscription != "g" || listed[0].AckFloor != 2 || listed[0].Labels["team"] != "data" {
		t.Fatalf("weir lists %+v (%v)\n%s", listed, err, r.stdout)
	}
	if r := ok("subscriptions", "snapshots", "describe", "grpc-snap"); !strings.Contains(r.stdout, "team=data") {
		t.Errorf("describe lacks the labels:\n%s", r.stdout)
	}
	// Made with weir's CLI: Google's client reads it.
	ok("subscriptions", "snapshots", "create", "weir-snap", "--subscription", "w")
	if s, err := sc.GetSnapshot(ctx, &pubsubpb.GetSnapshotRequest{Snapshot: "projects/p/snapshots/weir-snap"}); err != nil || s.GetTopic() != "projects/p/topics/t" {
		t.Fatalf("gRPC GetSnapshot of the CLI's snapshot: %v, %v", s, err)
	}

	publish(`"c"`, `"d"`)
	if got := receive(2); got != `"c","d"` {
		t.Fatalf("gRPC received %s", got)
	}
	if got := pull("w"); got != `"c","d"` {
		t.Fatalf("weir pulled %s", got)
	}
	// weir's subscription, sought with the CLI to the gRPC snapshot.
	ok("subscriptions", "seek", "w", "--snapshot", "grpc-snap")
	if got := pull("w"); got != `"c","d"` {
		t.Fatalf("after the CLI's seek to the gRPC snapshot weir pulled %q, want c and d", got)
	}
	// The gRPC subscription, sought through gRPC to the CLI's snapshot.
	if _, err := sc.Seek(ctx, &pubsubpb.SeekRequest{Subscription: "projects/p/subscriptions/g",
		Target: &pubsubpb.SeekRequest_Snapshot{Snapshot: "projects/p/snapshots/weir-snap"}}); err != nil {
		t.Fatalf("gRPC Seek to the CLI's snapshot: %v", err)
	}
	if got := receive(2); got != `"c","d"` {
		t.Fatalf("after the gRPC seek: %s", got)
	}
	// The gRPC subscription, sought with the CLI: still per message (the
	// gRPC API pulls only from per-message subscriptions, so receiving
	// shows it).
	ok("subscriptions", "seek", "g", "--snapshot", "grpc-snap")
	if got := receive(2); got != `"c","d"` {
		t.Fatalf("after the CLI's seek of the gRPC subscription: %s", got)
	}

	ok("subscriptions", "snapshots", "delete", "grpc-snap")
	if _, err := sc.GetSnapshot(ctx, &pubsubpb.GetSnapshotRequest{Snapshot: "projects/p/snapshots/grpc-snap"}); status.Code(err) != codes.NotFound {
		t.Fatalf("gRPC GetSnapshot of a snapshot the CLI deleted: %v", err)
	}
	srv.stop(syscall.SIGTERM)
}
