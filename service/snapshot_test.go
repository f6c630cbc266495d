package service

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/yamlpipe"
)

// snapshotPipeline is updatePipeline as a streaming job: an unbounded
// generator at 2000/s with 1s between events, so that one one-hour window
// (3600 events) per key stays open through the whole test.
func snapshotPipeline(db string, combine string) string {
	y := updatePipeline(db, false, combine, "")
	y = strings.Replace(y, "{count: 6000, rate: 3000, keys: 3, spacing: 1s, seed: 7}", "{rate: 2000, keys: 3, spacing: 1s, seed: 7}", 1)
	if strings.Contains(y, "count: 6000") {
		panic("snapshotPipeline: the generator's config changed")
	}
	return y
}

// oracleOf runs snapshotPipeline's computation without interruption over
// the first n events, into its own table.
func oracleOf(t *testing.T, dir string, n uint64) []string {
	t.Helper()
	db := filepath.Join(dir, fmt.Sprintf("oracle-%d.sqlite", n))
	y := strings.Replace(snapshotPipeline(db, "Sums"), "{rate: 2000,", fmt.Sprintf("{count: %d,", n), 1)
	p, err := yamlpipe.Load("oracle.yaml", []byte(y), yamlpipe.Options{BaseDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := weir.Run(context.Background(), p, weir.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	return tableRows(t, db)
}

// readTo returns how many events the generator of job id had read at its
// last checkpoint (one split: the job runs one worker).
func readTo(t *testing.T, s *Service, id string) uint64 {
	t.Helper()
	rec, err := s.core.Store.LastCheckpoint(id)
	if err != nil {
		t.Fatal(err)
	}
	pos := rec.Positions["Events"]
	if len(pos) != 1 || len(pos[0]) != 8 {
		t.Fatalf("job %s: generator positions %v", id, pos)
	}
	return binary.BigEndian.Uint64(pos[0])
}

func snapshotOf(t *testing.T, s *Service, ref string) *record.Snapshot {
	t.Helper()
	snap, err := s.CreateSnapshot(context.Background(), SnapshotRequest{Job: ref, Description: "before v2"})
	if err != nil {
		t.Fatalf("snapshot of %s: %v", ref, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	snap, err = s.WaitSnapshot(ctx, snap.ID)
	if err != nil || snap.State != record.SnapshotReady {
		t.Fatalf("snapshot: %+v %v", snap, err)
	}
	return snap
}

func cancelAndWait(t *testing.T, s *Service, id string) {
	t.Helper()
	if _, err := s.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, id, "the end", func(j *record.Job) bool { return j.State == record.StateCancelled })
	waitLetGo(t, s, id)
}

// drainFrom starts job name from snap with pipeline y and mapping, lets it
// read past `past` events, drains it and returns it with how far it read.
func drainFrom(t *testing.T, s *Service, snap *record.Snapshot, name, y, mapping, dir string, past int64) (*record.Job, uint64) {
	t.Helper()
	res, err := s.CreateFromSnapshot(context.Background(), FromSnapshotRequest{
		SubmitRequest: SubmitRequest{Name: name, Pipeline: y, PipelineFile: name + ".yaml", BaseDir: dir},
		SnapshotID:    snap.ID, Mapping: mapping})
	if err != nil {
		t.Fatalf("create from snapshot: %v (report %+v)", err, res)
	}
	j := res.Job
	if j.CreatedFromSnapshotID != snap.ID || j.Generation < snap.Generation+1 || j.State != record.StateRunning {
		t.Fatalf("job from snapshot: %+v", j)
	}
	waitElements(t, s, j.ID, "Events", past)
	if _, err := s.Drain(context.Background(), j.ID); err != nil {
		t.Fatal(err)
	}
	j = waitFor(t, s, j.ID, "DRAINED and committed", func(j *record.Job) bool {
		return j.State == record.StateDrained && !j.PendingCommit || j.State.Terminal() && j.State != record.StateDrained
	})
	waitLetGo(t, s, j.ID)
	if j.State != record.StateDrained {
		t.Fatalf("job from snapshot ended %s: %s", j.State, j.Error)
	}
	return j, readTo(t, s, j.ID)
}

// TestSnapshotRestoreEqualsUninterruptedRun covers (a) and (b): a snapshot
// of a running job, which keeps running and is cancelled; a new job of the
// name that drops the name's state; a restart; then v2, with its combine
// renamed through a mapping, started from the snapshot, and a copy under
// another name: each table equals a run without interruption over the
// events the job read.
func TestSnapshotRestoreEqualsUninterruptedRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	db := filepath.Join(dir, "job.sqlite")
	s := openService(t, data)
	v1 := submit(t, s, "totals", snapshotPipeline(db, "Sums"), dir)
	waitElements(t, s, v1.ID, "Events", 400)
	snap := snapshotOf(t, s, "totals")
	if snap.SourceJobID != v1.ID || snap.JobName != "totals" || snap.Generation != 1 || snap.TTL != "7d" ||
		!snap.ExpireTime.Equal(snap.CreationTime.Add(DefaultSnapshotTTL)) || snap.DiskSizeBytes <= 0 ||
		snap.Description != "before v2" || len(snap.Positions["Events"]) != 1 || snap.PubsubMetadata == nil {
		t.Fatalf("snapshot record: %+v", snap)
	}
	cut := binary.BigEndian.Uint64(snap.Positions["Events"][0])
	// The job goes on past the cut, checkpointing, then is cancelled.
	waitElements(t, s, v1.ID, "Events", int64(cut)+600)
	waitFor(t, s, v1.ID, "checkpoints after the cut", checkpointed(snap.Epoch+3))
	cancelAndWait(t, s, v1.ID)
	// A new job of the name drops the name's state; it writes elsewhere.
	other := submit(t, s, "totals", snapshotPipeline(filepath.Join(dir, "other.sqlite"), "Sums"), dir)
	waitFor(t, s, other.ID, "a checkpoint", checkpointed(1))
	cancelAndWait(t, s, other.ID)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s = openService(t, data)
	after, err := s.GetSnapshot(snap.ID)
	if err != nil || after.State != record.SnapshotReady || after.DiskSizeBytes != snap.DiskSizeBytes {
		t.Fatalf("after the job's end, a new job of the name and a restart: %+v %v", after, err)
	}

	v2, n := drainFrom(t, s, snap, "totals", snapshotPipeline(db, "Totals"), `{"Sums": "Totals"}`, dir, 1500)
	if v2.Generation != 3 {
		t.Errorf("v2 generation %d, want 3 (after the name's jobs 1 and 2)", v2.Generation)
	}
	if n >= 3600 {
		t.Fatalf("v2 read %d events: past the first window, the test's oracle does not apply", n)
	}
	if got, want := tableRows(t, db), oracleOf(t, dir, n); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("v2 from the snapshot (read %d, cut at %d) holds:\n%s\nwithout interruption:\n%s", n, cut, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The snapshot is unchanged by v2 and starts another name too.
	db3 := filepath.Join(dir, "copy.sqlite")
	cp, n3 := drainFrom(t, s, snap, "copy", snapshotPipeline(db3, "Sums"), "", dir, 300)
	if cp.Generation != 2 {
		t.Errorf("copy generation %d, want 2 (the snapshot's + 1)", cp.Generation)
	}
	// db3 holds only what the copy wrote after the cut (no window had
	// fired before it): its totals per key still cover every event.
	if got, want := tableRows(t, db3), oracleOf(t, dir, n3); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the copy from the snapshot (read %d) holds:\n%s\nwithout interruption:\n%s", n3, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	list, err := s.ListSnapshots("totals", false)
	if err != nil || len(list) != 1 || list[0].ID != snap.ID {
		t.Fatalf("list by name: %v %v", list, err)
	}
	if list, err := s.ListSnapshots(other.ID, false); err != nil || len(list) != 0 {
		t.Fatalf("list by another job's ID: %v %v", list, err)
	}
}

// TestSnapshotRefusedRestoreChangesNothing covers (c): a pipeline whose
// combine key changed is refused with the report, and no job, lineage or
// snapshot changes.
func TestSnapshotRefusedRestoreChangesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openService(t, filepath.Join(dir, "data"))
	v1 := submit(t, s, "totals", snapshotPipeline(filepath.Join(dir, "job.sqlite"), "Sums"), dir)
	waitElements(t, s, v1.ID, "Events", 200)
	snap := snapshotOf(t, s, v1.ID)
	cancelAndWait(t, s, v1.ID)
	before, _ := s.List(StatusAll)
	l0, _ := s.core.ReadLineage("totals")
	y := strings.Replace(snapshotPipeline(filepath.Join(dir, "job.sqlite"), "Sums"), "group_by: [key]", "group_by: [key, ts]", 1)
	for _, name := range []string{"totals", "fresh"} {
		res, err := s.CreateFromSnapshot(context.Background(), FromSnapshotRequest{
			SubmitRequest: SubmitRequest{Name: name, Pipeline: y, BaseDir: dir}, SnapshotID: snap.ID})
		if !hasCode(err, errcode.IncompatibleUpdate) || res == nil || res.Job != nil {
			t.Fatalf("%s: %v %+v", name, err, res)
		}
		found := false
		for _, f := range res.Report.Errors {
			found = found || f.Code == errcode.KeyCoderChanged
		}
		if !found {
			t.Errorf("%s: the report lacks %s: %+v", name, errcode.KeyCoderChanged, res.Report.Errors)
		}
	}
	after, _ := s.List(StatusAll)
	l1, _ := s.core.ReadLineage("totals")
	l2, _ := s.core.ReadLineage("fresh")
	if len(after) != len(before) || *l1 != *l0 || l2.LatestJobID != "" || l2.Generation != 0 {
		t.Fatalf("a refused create changed the registry: %d → %d jobs, lineage %+v → %+v, fresh %+v", len(before), len(after), l0, l1, l2)
	}
	if got, _ := s.GetSnapshot(snap.ID); got.State != record.SnapshotReady || got.StateTime != snap.StateTime {
		t.Fatalf("snapshot changed: %+v", got)
	}
	// Other refusals carry their codes.
	for _, tc := range []struct {
		req  SnapshotRequest
		code errcode.Code
	}{
		{SnapshotRequest{Job: v1.ID}, errcode.JobNotSnapshottable},
		{SnapshotRequest{Job: "nope"}, errcode.JobNotFound},
		{SnapshotRequest{Job: v1.ID, TTL: 30 * time.Minute}, errcode.InvalidTTL},
		{SnapshotRequest{Job: v1.ID, TTL: 31 * 24 * time.Hour}, errcode.InvalidTTL},
	} {
		if _, err := s.CreateSnapshot(context.Background(), tc.req); !hasCode(err, tc.code) {
			t.Errorf("%+v: %v, want %s", tc.req, err, tc.code)
		}
	}
	if _, err := ParseSnapshotTTL("2w"); !hasCode(err, errcode.InvalidTTL) {
		t.Errorf("ttl 2w: %v", err)
	}
	if _, err := s.GetSnapshot("00000000-0000-4000-8000-000000000000"); !hasCode(err, errcode.SnapshotNotFound) {
		t.Errorf("unknown snapshot: %v", err)
	}
	if _, err := s.DeleteSnapshot(snap.ID); err != nil {
		t.Fatal(err)
	}
	_, err := s.CreateFromSnapshot(context.Background(), FromSnapshotRequest{
		SubmitRequest: SubmitRequest{Name: "fresh", Pipeline: y, BaseDir: dir}, SnapshotID: snap.ID})
	if !hasCode(err, errcode.SnapshotCorrupt) {
		t.Errorf("from a deleted snapshot: %v", err)
	}
}

// TestSnapshotBatchJobNotSnapshottable: a batch job is refused.
func TestSnapshotBatchJobNotSnapshottable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openService(t, filepath.Join(dir, "data"))
	j := submit(t, s, "batch", updatePipeline(filepath.Join(dir, "b.sqlite"), false, "Sums", ""), dir)
	_, err := s.CreateSnapshot(context.Background(), SnapshotRequest{Job: j.ID})
	if !hasCode(err, errcode.JobNotSnapshottable) || !strings.Contains(err.Error(), "batch") {
		t.Fatalf("batch job: %v", err)
	}
}

// TestSnapshotExpiry covers (f): on the service's clock, a snapshot is
// deleted once its TTL has passed, by the loop while the service runs and
// at Open when it expired while the service was down.
func TestSnapshotExpiry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	clock := mtime.NewManualClock(mtime.FromTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)))
	open := func() *Service {
		s, err := Open(context.Background(), Options{DataDir: data, CheckpointInterval: 50 * time.Millisecond,
			Clock: clock, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		<-s.Recovered()
		return s
	}
	s := open()
	j := submit(t, s, "sums", streamingYAML, dir)
	waitFor(t, s, j.ID, "a checkpoint", checkpointed(1))
	take := func(ttl time.Duration) *record.Snapshot {
		snap, err := s.CreateSnapshot(context.Background(), SnapshotRequest{Job: j.ID, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		if snap, err = s.WaitSnapshot(context.Background(), snap.ID); err != nil || snap.State != record.SnapshotReady {
			t.Fatalf("%+v %v", snap, err)
		}
		return snap
	}
	short, long := take(time.Hour), take(2*time.Hour)
	if short.TTL != "1h" {
		t.Errorf("ttl %q, want 1h", short.TTL)
	}
	clock.Advance(mtime.Duration(90 * time.Minute / time.Millisecond))
	deadline := time.After(20 * time.Second)
	for {
		changed := s.core.Changes.Next()
		got, err := s.GetSnapshot(short.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == record.SnapshotDeleted {
			if _, err := s.core.Store.SnapshotRecord(short.ID); err == nil {
				t.Fatal("an expired snapshot's data is still there")
			}
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the snapshot did not expire: %+v", got)
		}
	}
	if got, _ := s.GetSnapshot(long.ID); got.State != record.SnapshotReady {
		t.Fatalf("the 2h snapshot after 90m: %s", got.State)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Down past the second snapshot's expiry: deleted at Open.
	clock.Advance(mtime.Duration(time.Hour / time.Millisecond))
	s = open()
	if got, err := s.GetSnapshot(long.ID); err != nil || got.State != record.SnapshotDeleted {
		t.Fatalf("after a restart past its expiry: %+v %v", got, err)
	}
	if list, _ := s.ListSnapshots("", false); len(list) != 0 {
		t.Errorf("list without --all shows deleted snapshots: %+v", list)
	}
	if list, _ := s.ListSnapshots("", true); len(list) != 2 {
		t.Errorf("list --all: %+v", list)
	}
}

// TestSnapshotWriteFailureLeavesJobRunning covers (h): a storage error
// while the snapshot's data is written (injected before its commit: a
// failed Pebble write would fail the whole store, and with it every job,
// see fault.go) ends the snapshot FAILED with the reason; the job keeps
// running and checkpointing.
func TestSnapshotWriteFailureLeavesJobRunning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	full := errors.New("no space left on device")
	s := openServiceHooks(t, filepath.Join(dir, "data"), Hooks{SnapshotWrite: func(string, int64) error { return full }})
	j := submitCheckpointed(t, s, dir)
	snap, err := s.CreateSnapshot(context.Background(), SnapshotRequest{Job: j.ID})
	if err != nil {
		t.Fatal(err)
	}
	snap, err = s.WaitSnapshot(context.Background(), snap.ID)
	if err != nil || snap.State != record.SnapshotFailed || !strings.Contains(snap.FailureReason, full.Error()) || snap.DiskSizeBytes != 0 {
		t.Fatalf("snapshot: %+v %v", snap, err)
	}
	if _, err := s.core.Store.SnapshotRecord(snap.ID); err == nil {
		t.Fatal("a failed snapshot has data")
	}
	epoch := snap.Epoch
	got := waitFor(t, s, j.ID, "checkpoints after the failed snapshot", checkpointed(epoch+2))
	if got.State != record.StateRunning || got.Error != "" {
		t.Fatalf("job after a failed snapshot: %s %q", got.State, got.Error)
	}
}

// TestSnapshotCutShortFailsAtOpen: a snapshot the server stopped in the
// middle of (its record RUNNING, no data: the data is written with READY)
// is FAILED after a restart, and the job it was of resumes untouched.
func TestSnapshotCutShortFailsAtOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	release := make(chan struct{})
	reached := make(chan string, 1)
	s := openServiceHooks(t, data, Hooks{SnapshotWrite: func(id string, _ int64) error {
		reached <- id
		<-release
		return nil
	}})
	j := submitCheckpointed(t, s, dir)
	snap, err := s.CreateSnapshot(context.Background(), SnapshotRequest{Job: j.ID})
	if err != nil {
		t.Fatal(err)
	}
	if id := <-reached; id != snap.ID {
		t.Fatalf("hook for %s, want %s", id, snap.ID)
	}
	if got, _ := s.GetSnapshot(snap.ID); got.State != record.SnapshotRunning {
		t.Fatalf("while copying: %s", got.State)
	}
	// The server stops while the snapshot is being copied: the copy sees
	// the stop and writes nothing. A kill -9 here leaves the same store
	// (the record RUNNING, no data), which the next Open repairs.
	closed := make(chan error, 1)
	go func() { closed <- s.Close(context.Background()) }()
	waitClosing(t, s)
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	s = openService(t, data)
	got, err := s.GetSnapshot(snap.ID)
	if err != nil || got.State != record.SnapshotFailed || got.FailureReason == "" {
		t.Fatalf("after a restart: %+v %v", got, err)
	}
	if _, err := s.core.Store.SnapshotRecord(snap.ID); err == nil {
		t.Fatal("a snapshot cut short has data")
	}
	waitFor(t, s, j.ID, "the job resumed and checkpointing", checkpointed(snap.Epoch+1))

	// What a kill -9 during the copy leaves: the record RUNNING, no data.
	left := *got
	left.ID, left.State, left.FailureReason = "11111111-1111-4111-8111-111111111111", record.SnapshotRunning, ""
	if err := s.snaps.PutSnapshot(&left); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s = openService(t, data)
	if got, err := s.GetSnapshot(left.ID); err != nil || got.State != record.SnapshotFailed || !strings.Contains(got.FailureReason, "stopped") {
		t.Fatalf("a RUNNING snapshot at Open: %+v %v", got, err)
	}
}

// waitClosing waits until Close has begun (the service's context is done).
func waitClosing(t *testing.T, s *Service) {
	t.Helper()
	select {
	case <-s.core.Ctx.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not begin")
	}
}
