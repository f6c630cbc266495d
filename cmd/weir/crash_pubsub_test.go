package main

import (
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// TestCLIServerCrashPubSubUpsert publishes a known stream to a topic while a
// job reads it (ReadFromPubSub → per-key sums in one-minute windows →
// WriteToSql upsert), kills the server with SIGKILL at random points three
// times, restarts it each time, then drains: the table's consumer-visible
// totals equal the ground truth exactly — nothing lost, nothing counted
// twice, whatever the crashes interrupted.
func TestCLIServerCrashPubSubUpsert(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts servers")
	}
	rng := rand.New(rand.NewPCG(11, 13))
	dir, work := t.TempDir(), t.TempDir()
	db := filepath.Join(work, "totals.db")
	pipeline := writeTestFile(t, work, "p.yaml", totalsPipeline("topic: orders", "", "", "", db))
	const total = 6000
	in := newCrashInput(t, work, 7)
	// chunk puts message i at base+i×100ms.
	chunk := func(from, to int) string { return in.chunk(from, to, time.Duration(from)*100*time.Millisecond) }
	srv := startServer(t, dir)
	id := srv.runOrdersJob(t, work, pipeline)
	bounds := []int{0, 1500, 3000, 4500, total}
	for i := 0; i < len(bounds)-1; i++ {
		// --id-field makes a publish retried after a crash harmless.
		if r := srv.cli(work, "topics", "publish", "orders", "--file", chunk(bounds[i], bounds[i+1]), "--id-field", "id"); r.code != ExitOK {
			t.Fatalf("publish chunk %d: %d %s", i, r.code, r.stderr)
		}
		if i == len(bounds)-2 {
			break
		}
		// Kill at a random point in time: a delay on purpose, since the
		// behaviour under test is that a crash wherever it lands (reading,
		// checkpointing, committing) loses and duplicates nothing.
		<-time.After(time.Duration(50+rng.IntN(600)) * time.Millisecond)
		srv.stop(syscall.SIGKILL)
		srv = startServer(t, dir)
		srv.waitJob(id, "RUNNING after the restart", stateIs("RUNNING"))
	}
	// Let the job read everything, then drain: every window fires.
	waitCaughtUp(t, srv, id)
	drainAndCheckTotals(t, srv, work, id, db, in.want, in.wantN)
	srv.stop(syscall.SIGTERM)
}
