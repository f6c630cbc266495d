package service

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/service/record"
)

// recipeSnapshot runs job name of recipeYAML (into db) on s, publishes
// messages 0..400, takes a snapshot once all are read and returns it
// with the job, which keeps running.
func recipeSnapshot(t *testing.T, s *Service, b *pubsub.Broker, name, db, dir string) (*record.Snapshot, *record.Job) {
	t.Helper()
	j := submit(t, s, name, fmt.Sprintf(recipeYAML, db), dir)
	waitFor(t, s, j.ID, "RUNNING", func(j *record.Job) bool { return j.State == record.StateRunning })
	publishRecipe(t, b, 0, 400, nil)
	waitBacklog(t, s, b, pubsub.SubscriptionName(name, "Events"))
	snap, err := s.CreateSnapshot(context.Background(), SnapshotRequest{Job: name})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if snap, err = s.WaitSnapshot(wctx, snap.ID); err != nil || snap.State != record.SnapshotReady {
		t.Fatalf("snapshot: %+v %v", snap, err)
	}
	return snap, j
}

// drainTotals drains job id, waits for its end and returns the table of db.
func drainTotals(t *testing.T, s *Service, id, db string) []string {
	t.Helper()
	if _, err := s.Drain(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	fin := waitFor(t, s, id, "DRAINED and committed", func(j *record.Job) bool {
		return j.State == record.StateDrained && !j.PendingCommit || j.State.Terminal() && j.State != record.StateDrained
	})
	if fin.State != record.StateDrained {
		t.Fatalf("job %s ended %s: %s", id, fin.State, fin.Error)
	}
	return totalsTable(t, db)
}

// assertNoJob checks that no job of name was recorded and that its name
// has no generation taken.
func assertNoJob(t *testing.T, s *Service, name string) {
	t.Helper()
	jobs, err := s.List(StatusAll)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Name == name {
			t.Errorf("a refused job from a snapshot was recorded: %s %s (%s) generation %d", j.ID, j.State, j.Error, j.Generation)
		}
	}
	if l, err := s.core.ReadLineage(name); err == nil && l.Generation != 0 {
		t.Errorf("a refused job from a snapshot took generation %d of %s", l.Generation, name)
	}
}

// TestCreateFromSnapshotOtherNameTopic (issue 22 item 3): a job created
// from a snapshot under another name than the snapshot's job reads the
// same topic through its own subscription, created at the snapshot's
// position: its sums are the snapshot's plus exactly the messages after
// the cut, none before, none twice, and the result says where the source
// started.
func TestCreateFromSnapshotOtherNameTopic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b := startBroker(t, dir, "recipe-events")
	s := openServiceWithBroker(t, filepath.Join(dir, "data"), b)
	snap, j := recipeSnapshot(t, s, b, "totals", filepath.Join(dir, "totals.sqlite"), dir)
	want := map[string][2]int64{}
	addRecipe(want, 0, 400) // the snapshot's state: its sums of 0..400
	publishRecipe(t, b, 400, 700, want)
	cancelAndWait(t, s, j.ID)

	db := filepath.Join(dir, "fromsnap.sqlite")
	req := FromSnapshotRequest{SubmitRequest: SubmitRequest{Name: "fromsnap", Pipeline: fmt.Sprintf(recipeYAML, db),
		PipelineFile: "p.yaml", BaseDir: dir}, SnapshotID: snap.ID}
	res, err := s.CreateFromSnapshot(ctx, req)
	if err != nil {
		t.Fatalf("CreateFromSnapshot under another name: %v", err)
	}
	if len(res.SourcePositions) != 1 {
		t.Fatalf("source positions %+v, want one", res.SourcePositions)
	}
	p := res.SourcePositions[0]
	if p.Step != "Events" || p.Subscription != pubsub.SubscriptionName("fromsnap", "Events") || p.Topic != "recipe-events" ||
		p.Translation != "exact" || p.StartSeq != 401 {
		t.Errorf("source position %+v, want Events on fromsnap--Events of recipe-events from sequence 401, exact", p)
	}
	waitBacklog(t, s, b, pubsub.SubscriptionName("fromsnap", "Events"))
	got := drainTotals(t, s, res.Job.ID, db)
	if w := rowsOf(want); strings.Join(got, "\n") != strings.Join(w, "\n") {
		t.Errorf("the job from the snapshot (key total count):\n%s\nthe snapshot's sums and what was published after the cut:\n%s", strings.Join(got, "\n"), strings.Join(w, "\n"))
	}
}

// TestCreateFromSnapshotRefusedBeforeJob (issue 22 item 3): what is known
// to make a source fail at its start is refused before a job is recorded,
// without a FAILED job and without taking a generation: a topic that is
// gone, a topic created again (the position lies beyond it), and a
// subscription of the new name that belongs to another topic. Validate-only
// says the same.
func TestCreateFromSnapshotRefusedBeforeJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b := startBroker(t, dir, "recipe-events")
	s := openServiceWithBroker(t, filepath.Join(dir, "data"), b)
	snap, j := recipeSnapshot(t, s, b, "totals", filepath.Join(dir, "totals.sqlite"), dir)
	cancelAndWait(t, s, j.ID)
	db := filepath.Join(dir, "fromsnap.sqlite")
	req := func(name string, validate bool) FromSnapshotRequest {
		return FromSnapshotRequest{SubmitRequest: SubmitRequest{Name: name, Pipeline: fmt.Sprintf(recipeYAML, db),
			PipelineFile: "p.yaml", BaseDir: dir}, SnapshotID: snap.ID, ValidateOnly: validate}
	}

	// The new name's subscription belongs to another topic.
	if _, err := b.CreateTopic(ctx, "other", pubsub.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateSubscription(ctx, pubsub.SubscriptionName("taken", "Events"), "other", pubsub.SubscriptionConfig{}); err != nil {
		t.Fatal(err)
	}
	for _, validate := range []bool{true, false} {
		if _, err := s.CreateFromSnapshot(ctx, req("taken", validate)); errcode.Of(err) != errcode.SnapshotSourceUnavailable {
			t.Errorf("validate %v, the name's subscription on another topic: %v, want SNAPSHOT_SOURCE_UNAVAILABLE", validate, err)
		}
	}
	assertNoJob(t, s, "taken")

	// The topic created again: the snapshot's position (sequence 400) lies
	// beyond its one message.
	if err := b.DeleteTopic(ctx, "recipe-events"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic(ctx, "recipe-events", pubsub.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	publishRecipe(t, b, 0, 1, nil)
	for _, validate := range []bool{true, false} {
		_, err := s.CreateFromSnapshot(ctx, req("again", validate))
		if errcode.Of(err) != errcode.SnapshotForeignPositions || !strings.Contains(err.Error(), "--source-positions from-publish-time") {
			t.Errorf("validate %v, a position beyond the topic: %v, want SNAPSHOT_FOREIGN_POSITIONS suggesting --source-positions", validate, err)
		}
	}
	assertNoJob(t, s, "again")

	// The topic gone.
	if err := b.DeleteTopic(ctx, "recipe-events"); err != nil {
		t.Fatal(err)
	}
	for _, validate := range []bool{true, false} {
		_, err := s.CreateFromSnapshot(ctx, req("gone", validate))
		if errcode.Of(err) != errcode.SnapshotSourceUnavailable || !strings.Contains(err.Error(), "recipe-events") {
			t.Errorf("validate %v, the topic gone: %v, want SNAPSHOT_SOURCE_UNAVAILABLE naming the topic", validate, err)
		}
	}
	assertNoJob(t, s, "gone")

	if _, err := s.CreateFromSnapshot(ctx, FromSnapshotRequest{SubmitRequest: req("bad", false).SubmitRequest, SnapshotID: snap.ID,
		SourcePositions: "sometime"}); errcode.Of(err) != errcode.InvalidRequest {
		t.Errorf("source positions %q: %v, want INVALID_REQUEST", "sometime", err)
	}
}

// TestCreateFromSnapshotForeignBroker (issue 22 item 4): a snapshot
// records whose broker its positions are; imported on a server with
// another broker, a job from it is refused (SNAPSHOT_FOREIGN_POSITIONS,
// nothing recorded) unless the request says how positions translate. By
// publish time, the new job adds to the snapshot's sums exactly the
// messages the other broker's topic got after the snapshot's position's
// publish time; earliest all of them; latest only what comes after the
// job starts. The result says what
// was done per source.
func TestCreateFromSnapshotForeignBroker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	bB := startBroker(t, filepath.Join(dir, "B"), "recipe-events")
	// Broker B's topic gets 30 messages before the snapshot's position is
	// published on broker A: a translation by publish time skips them.
	// (Starting broker A and the job takes far longer than the
	// millisecond of a publish time.)
	publishRecipe(t, bB, 1000, 1030, nil)

	bA := startBroker(t, filepath.Join(dir, "A"), "recipe-events")
	sA := openServiceWithBroker(t, filepath.Join(dir, "dataA"), bA)
	snap, j := recipeSnapshot(t, sA, bA, "totals", filepath.Join(dir, "totals.sqlite"), dir)
	if snap.Broker == nil || snap.Broker.ID == "" || len(snap.Broker.Sources) != 1 {
		t.Fatalf("the snapshot does not say whose positions it holds: %+v", snap.Broker)
	}
	idA, err := bA.BrokerIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if src := snap.Broker.Sources[0]; snap.Broker.ID != idA || src.Step != "Events" || src.Topic != "recipe-events" ||
		src.Seq != 400 || src.FirstSeq != 1 || src.LastSeq != 400 {
		t.Errorf("snapshot broker %+v, want broker %s, Events at 400 of recipe-events 1..400", snap.Broker, idA)
	}
	cancelAndWait(t, sA, j.ID)
	var file bytes.Buffer
	if _, err := sA.ExportSnapshot(ctx, snap.ID, &file); err != nil {
		t.Fatal(err)
	}

	sinceCut := map[string][2]int64{} // what broker B got after the cut
	publishRecipe(t, bB, 2000, 2050, sinceCut)
	sB := openServiceWithBroker(t, filepath.Join(dir, "dataB"), bB)
	imp, err := sB.ImportSnapshot(ctx, bytes.NewReader(file.Bytes()), 0)
	if err != nil {
		t.Fatal(err)
	}
	if imp.Broker == nil || imp.Broker.ID != idA {
		t.Fatalf("the imported snapshot lost its broker: %+v", imp.Broker)
	}
	req := func(name, mode string) FromSnapshotRequest {
		return FromSnapshotRequest{SubmitRequest: SubmitRequest{Name: name, Pipeline: fmt.Sprintf(recipeYAML, filepath.Join(dir, name+".sqlite")),
			PipelineFile: "p.yaml", BaseDir: dir}, SnapshotID: imp.ID, SourcePositions: mode}
	}
	for _, mode := range []string{"", "fail"} {
		_, err := sB.CreateFromSnapshot(ctx, req("totals", mode))
		if errcode.Of(err) != errcode.SnapshotForeignPositions || !strings.Contains(err.Error(), "from-publish-time") {
			t.Errorf("source positions %q on another broker: %v, want SNAPSHOT_FOREIGN_POSITIONS suggesting from-publish-time", mode, err)
		}
	}
	assertNoJob(t, sB, "totals")

	// Each job reads what its translation says was there when it started,
	// and 10 messages published after it started.
	next := 3000
	for _, c := range []struct{ name, mode string }{{"bytime", "from-publish-time"}, {"earliest", "earliest"}, {"latest", "latest"}} {
		t.Run(c.name, func(t *testing.T) {
			ti, err := bB.Topic(ctx, "recipe-events")
			if err != nil {
				t.Fatal(err)
			}
			var want map[string][2]int64
			var start uint64
			switch c.mode {
			case "from-publish-time":
				want, start = copyWant(sinceCut), 31
			case "earliest":
				want, start = copyWant(sinceCut), 1
				addRecipe(want, 1000, 1030)
			case "latest":
				want, start = map[string][2]int64{}, ti.LastSeq+1
			}
			addRecipe(want, 0, 400) // the snapshot's state: its sums of 0..400

			res, err := sB.CreateFromSnapshot(ctx, req(c.name, c.mode))
			if err != nil {
				t.Fatalf("source positions %s: %v", c.mode, err)
			}
			if len(res.SourcePositions) != 1 || res.SourcePositions[0].Translation != c.mode || res.SourcePositions[0].StartSeq != start ||
				!strings.Contains(strings.Join(res.Notes, "\n"), res.SourcePositions[0].Note) {
				t.Fatalf("source positions %+v (notes %q), want %s from sequence %d, in the notes", res.SourcePositions, res.Notes, c.mode, start)
			}
			publishRecipe(t, bB, next, next+10, want)
			addRecipe(sinceCut, next, next+10)
			next += 10
			// The job reads every message of its stretch (the counts it
			// wants beyond the snapshot's 400) before it is drained: on a
			// loaded machine the subscription's backlog could read 0
			// before its consumer had started.
			var read int64
			for _, w := range want {
				read += w[1]
			}
			waitElements(t, sB, res.Job.ID, "Events", read-400)
			waitBacklog(t, sB, bB, pubsub.SubscriptionName(c.name, "Events"))
			got := drainTotals(t, sB, res.Job.ID, filepath.Join(dir, c.name+".sqlite"))
			if w := rowsOf(want); strings.Join(got, "\n") != strings.Join(w, "\n") {
				t.Errorf("%s (key total count):\n%s\nwant:\n%s", c.mode, strings.Join(got, "\n"), strings.Join(w, "\n"))
			}
		})
	}
}

func copyWant(w map[string][2]int64) map[string][2]int64 {
	out := map[string][2]int64{}
	for k, v := range w {
		out[k] = v
	}
	return out
}

// addRecipe adds what publishRecipe(from, to) publishes to want.
func addRecipe(want map[string][2]int64, from, to int) {
	for i := from; i < to; i++ {
		key := fmt.Sprintf("k%d", i%5)
		w := want[key]
		want[key] = [2]int64{w[0] + int64(i), w[1] + 1}
	}
}

// recipeFixture is a service whose job "totals" (recipeYAML) read the
// recipe's messages 0..400, was snapshotted and drained: the start of the
// tests that create jobs from its snapshot.
type recipeFixture struct {
	dir, data string
	b         *pubsub.Broker
	s         *Service
	snap      *record.Snapshot
}

// drainedRecipeSnapshot makes a recipeFixture.
func drainedRecipeSnapshot(t *testing.T) *recipeFixture {
	t.Helper()
	f := &recipeFixture{dir: t.TempDir()}
	f.b = startBroker(t, f.dir, "recipe-events")
	f.data = filepath.Join(f.dir, "data")
	f.s = openServiceWithBroker(t, f.data, f.b)
	snap, j := recipeSnapshot(t, f.s, f.b, "totals", filepath.Join(f.dir, "totals.sqlite"), f.dir)
	if rows := drainTotals(t, f.s, j.ID, filepath.Join(f.dir, "totals.sqlite")); len(rows) == 0 {
		t.Fatal("the drained job wrote no rows")
	}
	f.snap = snap
	return f
}

// fromSnapshotAcrossRestart creates job name from the fixture's snapshot
// with pipeline (workers workers), publishes the recipe's messages
// 400..550, waits for two of the new job's checkpoints, restarts the
// service, publishes 550..700 and drains the job. It returns the create's
// result, the table of db ("key total count" lines) and what was
// published after the cut (key → total, count); the service it left
// running (f.s) is closed with the test.
func (f *recipeFixture) fromSnapshotAcrossRestart(t *testing.T, name, pipeline string, workers int, db string) (*UpdateResult, []string, map[string][2]int64) {
	t.Helper()
	ctx := context.Background()
	res, err := f.s.CreateFromSnapshot(ctx, FromSnapshotRequest{SubmitRequest: SubmitRequest{Name: name,
		Pipeline: pipeline, PipelineFile: "p.yaml", BaseDir: f.dir, Options: record.JobOptions{NumWorkers: workers}}, SnapshotID: f.snap.ID})
	if err != nil {
		t.Fatalf("CreateFromSnapshot: %v", err)
	}
	after := map[string][2]int64{}
	publishRecipe(t, f.b, 400, 550, after)
	sub := pubsub.SubscriptionName(name, "Events")
	waitBacklog(t, f.s, f.b, sub)
	waitCheckpointsAfter(t, f.s, 2, res.Job.ID)
	// A restart restores what the new job checkpointed.
	if err := f.s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f.s = openServiceWithBroker(t, f.data, f.b)
	publishRecipe(t, f.b, 550, 700, after)
	waitBacklog(t, f.s, f.b, sub)
	return res, drainTotals(t, f.s, res.Job.ID, db), after
}
