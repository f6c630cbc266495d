package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/service/record"
)

// batchYAML is the batch half of the reference fixture (docs/ARCHITECTURE.md): totals NORTH 425, WEST 100,
// one reject.
const batchYAML = `pipeline:
  transforms:
    - type: Create
      name: Transactions
      config:
        elements:
          - {region: NORTH, amount: 250}
          - {region: NORTH, amount: 175}
          - {region: WEST, amount: 100}
          - {region: UNKNOWN, amount: 50}
    - type: Validate
      name: CheckRegion
      input: Transactions
      config:
        rules:
          known_region: region in ["NORTH", "WEST"]
      error_handling: {output: invalid}
    - type: Combine
      name: Totals
      input: CheckRegion
      config:
        group_by: region
        combine:
          total: {value: amount, fn: sum}
    - type: WriteToJson
      name: WriteTotals
      input: Totals
      config: {path: out/totals.jsonl}
    - type: WriteToJson
      name: WriteRejects
      input: CheckRegion.invalid
      config: {path: out/rejects.jsonl}
`

// streamingYAML generates 400 events/s, 100ms of event time apart, summed
// per key in 10s windows: windows fire while the job runs.
const streamingYAML = `pipeline:
  transforms:
    - type: Generate
      name: Events
      config: {rate: 400, keys: 3, spacing: 100ms}
    - type: Combine
      name: Sums
      input: Events
      windowing: {type: fixed, size: 10s}
      config:
        group_by: key
        combine:
          total: {value: amount, fn: sum}
          n: {value: amount, fn: count}
    - type: WriteToJson
      name: WriteSums
      input: Sums
      config: {path: out/sums.jsonl}
`

// statelessYAML is a streaming pipeline without keyed state: every
// step can be checkpointed.
const statelessYAML = `pipeline:
  transforms:
    - type: Generate
      name: Events
      config: {rate: 400, keys: 3, spacing: 100ms}
    - type: MapToFields
      name: Double
      input: Events
      config:
        fields: {key: key, doubled: amount * 2}
    - type: WriteToJson
      name: WriteDoubled
      input: Double
      config: {path: out/doubled.jsonl}
`

// waitElements waits until step of job ref has read at least n elements,
// looking again at every change of the service (every metrics sample of a
// running job is one).
func waitElements(t *testing.T, s *Service, ref, step string, n int64) {
	t.Helper()
	waitStep(t, s, ref, step, fmt.Sprintf("read %d elements", n), func(st record.StepMetrics) bool { return st.ElementsIn >= n })
}

// waitStep waits until step of job ref has metrics for which ok holds;
// what names the wait in the failure.
func waitStep(t *testing.T, s *Service, ref, step, what string, ok func(record.StepMetrics) bool) {
	t.Helper()
	waitStepOf(t, s, s.Metrics, ref, step, what, ok)
}

// waitStepOf is waitStep reading the metrics with metrics (s.Metrics, or
// s.DescribeMetrics).
func waitStepOf(t *testing.T, s *Service, metrics func(string) (*record.JobMetrics, error), ref, step, what string, ok func(record.StepMetrics) bool) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	// Live metrics change without a notice: the service notifies a change
	// at each registry write and each checkpoint interval, which a test
	// may set to an hour. So the wait also looks again every 20 ms.
	look := time.NewTicker(20 * time.Millisecond)
	defer look.Stop()
	for {
		changed := s.core.Changes.Next()
		m, err := metrics(ref)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range m.Steps {
			if st.Name == step && ok(st) {
				return
			}
		}
		select {
		case <-changed:
		case <-look.C:
		case <-deadline.C:
			t.Fatalf("job %s: step %s did not %s: %+v", ref, step, what, m.Steps)
		}
	}
}

// testClock is a clock tests can read; it follows the wall clock so that
// metrics ages stay meaningful, shifted to a fixed date.
type testClock struct{ base time.Time }

func (c testClock) Now() mtime.Time {
	return mtime.FromTime(time.Date(2026, 11, 30, 1, 51, 2, 0, time.UTC).Add(time.Since(c.base)))
}

func openService(t *testing.T, dataDir string) *Service {
	t.Helper()
	s, err := Open(context.Background(), Options{DataDir: dataDir, CheckpointInterval: 50 * time.Millisecond,
		Clock: testClock{base: time.Now()}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatalf("opening the service: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	select {
	case <-s.Recovered():
	case <-time.After(30 * time.Second):
		t.Fatal("the jobs of the data directory did not resume within 30s")
	}
	return s
}

func submit(t *testing.T, s *Service, name, yaml, baseDir string) *record.Job {
	t.Helper()
	j, err := s.Submit(context.Background(), SubmitRequest{Name: name, Pipeline: yaml, PipelineFile: name + ".yaml", BaseDir: baseDir})
	if err != nil {
		t.Fatalf("submitting %s: %v", name, err)
	}
	return j
}

// waitFor waits until job ref satisfies cond, reading it again at every
// change of the service (a registry write, a metrics sample, an execution
// let go of).
func waitFor(t *testing.T, s *Service, ref string, what string, cond func(*record.Job) bool) *record.Job {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		changed := s.core.Changes.Next()
		j, err := s.Get(ref)
		if err != nil {
			t.Fatalf("getting %s: %v", ref, err)
		}
		if cond(j) {
			return j
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("job %s: timed out waiting for %s; state %s, error %q", ref, what, j.State, j.Error)
		}
	}
}

// waitLetGo waits until the service no longer holds an execution of job
// id (a finished job's supervisor lets go of it after recording its end).
func waitLetGo(t *testing.T, s *Service, id string) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		changed := s.core.Changes.Next()
		if s.core.RunningJob(id) == nil {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("job %s: the service still holds its execution", id)
		}
	}
}

func waitState(t *testing.T, s *Service, ref string, want record.JobState) *record.Job {
	t.Helper()
	return waitFor(t, s, ref, want.String(), func(j *record.Job) bool { return j.State == want || j.State.Terminal() })
}

func checkpointed(epoch uint64) func(*record.Job) bool {
	return func(j *record.Job) bool { return j.LastCheckpoint != nil && j.LastCheckpoint.Epoch >= epoch }
}

// startBroker starts an embedded broker storing under dir/broker, with the
// topics (default configuration); it is shut down when the test ends.
func startBroker(t *testing.T, dir string, topics ...string) *pubsub.Broker {
	t.Helper()
	ctx := context.Background()
	b, err := pubsub.StartEmbedded(ctx, pubsub.Options{StoreDir: filepath.Join(dir, "broker"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Shutdown(context.Background()) })
	for _, topic := range topics {
		if _, err := b.CreateTopic(ctx, topic, pubsub.TopicConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// openServiceWithBroker opens a service on dataDir whose jobs use broker
// b, with 50 ms checkpoints; it is closed when the test ends.
func openServiceWithBroker(t *testing.T, dataDir string, b *pubsub.Broker) *Service {
	t.Helper()
	s, err := Open(context.Background(), Options{DataDir: dataDir, CheckpointInterval: 50 * time.Millisecond,
		Clock: testClock{base: time.Now()}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Broker: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// sqlRows is what readElems and scanTotals need of *sql.Rows and
// pgx.Rows.
type sqlRows interface {
	Next() bool
	Scan(...any) error
	Err() error
}

// drainedAndCommitted holds for a job that ended DRAINED with its final
// checkpoint committed, or ended otherwise (the waiter then says how).
func drainedAndCommitted(j *record.Job) bool {
	return j.State == record.StateDrained && !j.PendingCommit || j.State.Terminal() && j.State != record.StateDrained
}

func states(j *record.Job) []record.JobState {
	var out []record.JobState
	for _, h := range j.History {
		out = append(out, h.State)
	}
	return out
}

func equalStates(a, b []record.JobState) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestBatchJobDone(t *testing.T) {
	t.Parallel()
	s := openService(t, t.TempDir())
	base := t.TempDir()
	j := submit(t, s, "regional-totals", batchYAML, base)
	if j.Type != record.TypeBatch || j.Generation != 1 || !strings.HasPrefix(j.ID, "2026-11-30_01_5") {
		t.Errorf("new job: type %s, generation %d, id %s", j.Type, j.Generation, j.ID)
	}
	j = waitState(t, s, j.ID, record.StateDone)
	if j.State != record.StateDone {
		t.Fatalf("state %s, want DONE (error %q)", j.State, j.Error)
	}
	if want := []record.JobState{record.StatePending, record.StateRunning, record.StateDone}; !equalStates(states(j), want) {
		t.Errorf("history %v, want %v", states(j), want)
	}
	if j.Metrics == nil {
		t.Fatal("a finished job has no final metrics")
	}
	got := map[string]record.StepMetrics{}
	for _, st := range j.Metrics.Steps {
		got[st.Name] = st
	}
	if got["CheckRegion"].Rejects != 1 || got["Totals"].ElementsOut != 2 || got["Transactions"].ElementsOut != 4 {
		t.Errorf("final metrics %+v", j.Metrics.Steps)
	}
	// The reject is counted by its reason: the rule that failed.
	if r := got["CheckRegion"].RejectsByReason; len(r) != 1 || r["known_region"] != 1 {
		t.Errorf("CheckRegion's rejects by reason: %v, want known_region: 1", r)
	}
	out, err := os.ReadFile(filepath.Join(base, "out", "totals.jsonl"))
	if err != nil {
		t.Fatalf("relative sink path not resolved against base_dir: %v", err)
	}
	for _, want := range []string{`"NORTH"`, "425", `"WEST"`, "100"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("totals lack %s:\n%s", want, out)
		}
	}
	if j.Delivery != record.DeliveryAtLeastOnce || j.DeliveryNote == "" {
		t.Errorf("delivery %q (%q): file sinks make a job at-least-once", j.Delivery, j.DeliveryNote)
	}
	// A rerun of the name never overwrites what the first job wrote
	// (OUTPUT_EXISTS, issue 12 item 13); its file is untouched.
	_, err = s.Submit(context.Background(), SubmitRequest{Name: "regional-totals", Pipeline: batchYAML, PipelineFile: "regional-totals.yaml", BaseDir: base})
	if errcode.Of(err) != errcode.OutputExists || !strings.Contains(fmt.Sprint(err), "earlier job of regional-totals") {
		t.Errorf("rerun writing the first job's file: %v, want OUTPUT_EXISTS naming the earlier job", err)
	}
	if again, _ := os.ReadFile(filepath.Join(base, "out", "totals.jsonl")); string(again) != string(out) {
		t.Errorf("the refused rerun changed the first job's output")
	}
	// The name is free again: a rerun elsewhere gets generation 2.
	base = t.TempDir()
	j2 := submit(t, s, "regional-totals", batchYAML, base)
	if j2.Generation != 2 || j2.ID == j.ID {
		t.Errorf("rerun: generation %d, id %s (first %s)", j2.Generation, j2.ID, j.ID)
	}
	waitState(t, s, j2.ID, record.StateDone)
	if byName, err := s.Get("regional-totals"); err != nil || byName.ID != j2.ID {
		t.Errorf("Get by name of a terminated lineage = %v, %v; want the latest job %s", byName, err, j2.ID)
	}
}

// readWindows returns the records the streaming pipeline wrote.
func readWindows(t *testing.T, path string) []map[string]any {
	t.Helper()
	// A streaming job writes part files next to path (files.PartName).
	ext := filepath.Ext(path)
	parts, err := filepath.Glob(strings.TrimSuffix(path, ext) + "-g*-e*-w*" + ext)
	if err != nil || len(parts) == 0 {
		t.Fatalf("no part files of %s: %v", path, err)
	}
	sort.Strings(parts)
	var b []byte
	for _, p := range parts {
		pb, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("reading %s: %v", p, err)
		}
		b = append(b, pb...)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("decoding %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestStreamingDrain(t *testing.T) {
	t.Parallel()
	s := openService(t, t.TempDir())
	base := t.TempDir()
	j := submit(t, s, "sums", streamingYAML, base)
	if j.Type != record.TypeStreaming || j.State != record.StateRunning {
		t.Fatalf("type %s, state %s", j.Type, j.State)
	}
	if !j.Checkpointing && !strings.Contains(j.CheckpointNote, "cannot be checkpointed") {
		t.Errorf("the job runs without checkpoints and does not say why: %q", j.CheckpointNote)
	}
	waitElements(t, s, j.ID, "Sums", 100)
	m, err := s.Metrics("sums")
	if err != nil {
		t.Fatal(err)
	}
	if m.DataWatermark == "" || m.DataWatermarkAgeSeconds == nil {
		t.Errorf("no data watermark in live metrics: %+v", m)
	}
	if _, err := s.Drain(context.Background(), "sums"); err != nil {
		t.Fatalf("drain: %v", err)
	}
	j = waitState(t, s, j.ID, record.StateDrained)
	if j.State != record.StateDrained {
		t.Fatalf("state %s, want DRAINED (error %q)", j.State, j.Error)
	}
	if want := []record.JobState{record.StatePending, record.StateRunning, record.StateDraining, record.StateDrained}; !equalStates(states(j), want) {
		t.Errorf("history %v, want %v", states(j), want)
	}
	var total, read int64
	for _, st := range j.Metrics.Steps {
		if st.Name == "Events" {
			read = st.ElementsOut
		}
	}
	// The sinks commit the final checkpoint after DRAINED is durable.
	waitLetGo(t, s, j.ID)
	recs := readWindows(t, filepath.Join(base, "out", "sums.jsonl"))
	last := 0
	for _, r := range recs {
		total += int64(r["n"].(float64))
		if r["window_start"] == nil {
			t.Errorf("record without window_start: %v", r)
		}
		if p, _ := r["pane"].(map[string]any); p["is_last"] == true {
			last++
		}
	}
	if read == 0 || total != read {
		t.Errorf("windows count %d elements, the source read %d", total, read)
	}
	if last == 0 {
		t.Errorf("no final pane (is_last) after the drain among %d records", len(recs))
	}
	// DRAINED is recorded before the supervisor lets go of the execution.
	waitLetGo(t, s, j.ID)
	if ids := s.core.RunningIDs(); len(ids) != 0 {
		t.Errorf("executions still registered after the drain: %v", ids)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	s := openService(t, t.TempDir())
	j := submit(t, s, "sums", statelessYAML, t.TempDir())
	waitFor(t, s, j.ID, "a checkpoint", checkpointed(1))
	c, err := s.Cancel(context.Background(), j.ID)
	if err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if c.State != record.StateCancelling && c.State != record.StateCancelled {
		t.Errorf("state right after cancel = %s", c.State)
	}
	j = waitState(t, s, j.ID, record.StateCancelled)
	if want := []record.JobState{record.StatePending, record.StateRunning, record.StateCancelling, record.StateCancelled}; !equalStates(states(j), want) {
		t.Errorf("history %v, want %v", states(j), want)
	}
}

func TestIllegalTransitions(t *testing.T) {
	t.Parallel()
	s := openService(t, t.TempDir())
	// The job "running" must stay DRAINING, then CANCELLING, while the
	// table runs: the end of its execution is held until the table is done.
	var holdEnd atomic.Pointer[string]
	endGate := make(chan struct{})
	var once sync.Once
	releaseEnd := func() { once.Do(func() { close(endGate) }) }
	t.Cleanup(releaseEnd)
	s.core.Hooks.Finishing = func(id string) {
		if p := holdEnd.Load(); p != nil && *p == id {
			<-endGate
		}
	}
	base := t.TempDir()
	batch := waitState(t, s, submit(t, s, "batch", batchYAML, base).ID, record.StateDone)
	// Each job its own directory: a sink path is one job name's.
	drained := submit(t, s, "drained", streamingYAML, t.TempDir())
	if _, err := s.Drain(context.Background(), drained.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, drained.ID, record.StateDrained)
	running := submit(t, s, "running", streamingYAML, t.TempDir())
	holdEnd.Store(&running.ID)
	// A batch job that still runs: Generate with a large count.
	slowBatch := submit(t, s, "slow-batch", strings.Replace(streamingYAML, "rate: 400,", "rate: 400, count: 1000000,", 1), t.TempDir())

	tests := []struct {
		name string
		op   func(context.Context, string) (*record.Job, error)
		ref  string
		code errcode.Code
	}{
		{"drain a DRAINED job", s.Drain, drained.ID, errcode.JobTerminated},
		{"cancel a DONE job", s.Cancel, batch.ID, errcode.JobTerminated},
		{"drain a DONE job", s.Drain, batch.ID, errcode.JobTerminated},
		{"drain a running batch job", s.Drain, slowBatch.ID, errcode.BatchJobNotDrainable},
		{"drain an unknown job", s.Drain, "no-such-job", errcode.JobNotFound},
		{"cancel an unknown ID", s.Cancel, "2026-01-01_00_00_00-00000000", errcode.JobNotFound},
		{"drain twice is harmless", s.Drain, running.ID, ""},
		{"drain again", s.Drain, running.ID, ""},
		{"cancel a DRAINING job", s.Cancel, running.ID, ""},
		{"cancel twice is harmless", s.Cancel, running.ID, ""},
	}
	for _, tt := range tests {
		_, err := tt.op(context.Background(), tt.ref)
		if got := errcode.Of(err); (err == nil) != (tt.code == "") || (err != nil && got != tt.code) {
			t.Errorf("%s: err %v (code %s), want code %q", tt.name, err, got, tt.code)
		}
	}
	releaseEnd()
	if _, err := s.Cancel(context.Background(), slowBatch.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, slowBatch.ID, record.StateCancelled)
	waitState(t, s, running.ID, record.StateCancelled)
}

func TestSubmitErrors(t *testing.T) {
	t.Parallel()
	s := openService(t, t.TempDir())
	base := t.TempDir()
	active := submit(t, s, "busy", streamingYAML, base)
	tests := []struct {
		name string
		req  SubmitRequest
		code errcode.Code
		msg  []string
	}{
		{"empty name", SubmitRequest{Pipeline: batchYAML, BaseDir: base}, errcode.InvalidJobName, []string{"needs a name"}},
		{"upper case", SubmitRequest{Name: "Totals", Pipeline: batchYAML, BaseDir: base}, errcode.InvalidJobName, []string{`"Totals"`, "[a-z]"}},
		{"trailing dash", SubmitRequest{Name: "totals-", Pipeline: batchYAML, BaseDir: base}, errcode.InvalidJobName, []string{"totals-"}},
		{"leading digit", SubmitRequest{Name: "1totals", Pipeline: batchYAML, BaseDir: base}, errcode.InvalidJobName, nil},
		{"underscore", SubmitRequest{Name: "my_job", Pipeline: batchYAML, BaseDir: base}, errcode.InvalidJobName, nil},
		{"negative workers", SubmitRequest{Name: "w", Pipeline: batchYAML, BaseDir: base, Options: record.JobOptions{NumWorkers: -1}}, errcode.InvalidOptions, []string{"num_workers"}},
		{"too many workers", SubmitRequest{Name: "w", Pipeline: batchYAML, BaseDir: base, Options: record.JobOptions{NumWorkers: 5000}}, errcode.InvalidOptions, []string{"num_workers"}},
		{"relative base dir", SubmitRequest{Name: "w", Pipeline: batchYAML, BaseDir: "rel"}, errcode.InvalidRequest, []string{"base_dir"}},
		{"empty pipeline", SubmitRequest{Name: "w", BaseDir: base}, errcode.InvalidPipeline, []string{"empty"}},
		{"unknown transform", SubmitRequest{Name: "w", Pipeline: "pipeline:\n  transforms:\n    - type: Frobnicate\n", PipelineFile: "p.yaml", BaseDir: base}, errcode.InvalidPipeline, []string{"p.yaml:3:13", "Frobnicate"}},
		{"second active job of a name", SubmitRequest{Name: "busy", Pipeline: streamingYAML, BaseDir: base}, errcode.JobNameActive, []string{`"busy"`, active.ID}},
	}
	for _, tt := range tests {
		_, err := s.Submit(context.Background(), tt.req)
		if errcode.Of(err) != tt.code {
			t.Errorf("%s: err %v (code %s), want %s", tt.name, err, errcode.Of(err), tt.code)
			continue
		}
		for _, m := range tt.msg {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("%s: message %q lacks %q", tt.name, err, m)
			}
		}
	}
	// Refused submissions consume no generation.
	if _, err := s.Cancel(context.Background(), "busy"); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, active.ID, record.StateCancelled)
	if j := submit(t, s, "busy", streamingYAML, base); j.Generation != 2 {
		t.Errorf("generation after a refused submission = %d, want 2", j.Generation)
	}
	if _, err := s.Cancel(context.Background(), "busy"); err != nil {
		t.Fatal(err)
	}
}

func TestListStatus(t *testing.T) {
	t.Parallel()
	s := openService(t, t.TempDir())
	base := t.TempDir()
	done := waitState(t, s, submit(t, s, "batch", batchYAML, base).ID, record.StateDone)
	run := submit(t, s, "stream", streamingYAML, base)
	tests := []struct {
		status string
		want   []string
		code   errcode.Code
	}{
		{"active", []string{run.ID}, ""},
		{"terminated", []string{done.ID}, ""},
		{"all", []string{run.ID, done.ID}, ""},
		{"", []string{run.ID, done.ID}, ""},
		{"running", nil, errcode.InvalidFilter},
	}
	for _, tt := range tests {
		st, err := ParseStatus(tt.status)
		if tt.code != "" {
			if errcode.Of(err) != tt.code {
				t.Errorf("status %q: err %v, want %s", tt.status, err, tt.code)
			}
			continue
		}
		jobs, err := s.List(st)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		if strings.Join(ids, ",") != strings.Join(tt.want, ",") {
			t.Errorf("status %q: %v, want %v", tt.status, ids, tt.want)
		}
	}
	if _, err := s.Cancel(context.Background(), run.ID); err != nil {
		t.Fatal(err)
	}
}

// TestRestartResumes closes the service while a streaming job runs and
// opens the same data directory again: the job is still RUNNING, resumes
// from its last checkpoint (epochs continue) and can be drained.
func TestRestartResumes(t *testing.T) {
	t.Parallel()
	dir, base := t.TempDir(), t.TempDir()
	s := openService(t, dir)
	j := submit(t, s, "sums", statelessYAML, base)
	if !j.Checkpointing {
		t.Fatalf("a stateless pipeline runs without checkpoints: %s", j.CheckpointNote)
	}
	j = waitFor(t, s, j.ID, "three checkpoints", checkpointed(3))
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}
	s2 := openService(t, dir)
	after, err := s2.Get("sums")
	if err != nil {
		t.Fatal(err)
	}
	if after.State != record.StateRunning || after.ID != j.ID {
		t.Fatalf("after restart: job %s state %s, want %s RUNNING", after.ID, after.State, j.ID)
	}
	if after.LastCheckpoint.Epoch < j.LastCheckpoint.Epoch {
		t.Errorf("the shutdown checkpoint %d is older than %d", after.LastCheckpoint.Epoch, j.LastCheckpoint.Epoch)
	}
	if ids := s2.core.RunningIDs(); len(ids) != 1 || ids[0] != j.ID {
		t.Fatalf("running after restart: %v", ids)
	}
	waitFor(t, s2, j.ID, "a checkpoint after the restart", checkpointed(after.LastCheckpoint.Epoch+2))
	if _, err := s2.Drain(context.Background(), "sums"); err != nil {
		t.Fatal(err)
	}
	if d := waitState(t, s2, j.ID, record.StateDrained); d.State != record.StateDrained {
		t.Fatalf("state %s (error %q)", d.State, d.Error)
	}
}

func TestStateMachine(t *testing.T) {
	t.Parallel()
	terminal := map[record.JobState]bool{record.StateDone: true, record.StateDrained: true, record.StateCancelled: true, record.StateUpdated: true, record.StateFailed: true}
	for _, from := range record.AllStates() {
		if from.Terminal() != terminal[from] {
			t.Errorf("%s.Terminal() = %v", from, from.Terminal())
		}
		for _, to := range record.AllStates() {
			if terminal[from] && record.CanTransition(from, to) {
				t.Errorf("terminal %s may move to %s", from, to)
			}
			if !terminal[from] && to == record.StateFailed && !record.CanTransition(from, to) {
				t.Errorf("%s cannot fail", from)
			}
		}
		if got, err := record.ParseJobState(from.String()); err != nil || got != from {
			t.Errorf("record.ParseJobState(%s) = %v, %v", from, got, err)
		}
	}
	titles := map[record.JobState]string{record.StatePending: "Pending", record.StateCancelling: "Cancelling", record.StateUpdated: "Updated"}
	for st, want := range titles {
		if st.Title() != want {
			t.Errorf("%s.Title() = %q, want %q", st, st.Title(), want)
		}
	}
	j := &record.Job{ID: "x", Name: "n", State: record.StateRunning}
	steps := []struct {
		to   record.JobState
		code errcode.Code
		want record.JobState
	}{
		{record.StatePending, errcode.IllegalTransition, record.StateRunning},
		{record.StateDraining, "", record.StateDraining},
		{record.StateDone, errcode.IllegalTransition, record.StateDraining},
		{record.StateDrained, "", record.StateDrained},
		{record.StateRunning, errcode.JobTerminated, record.StateDrained},
		{record.StateFailed, errcode.JobTerminated, record.StateDrained},
	}
	if record.CanTransition(record.StateCancelling, record.StateDraining) || record.CanTransition(record.StateRunning, record.StateDrained) || record.CanTransition(record.StateRunning, record.StatePending) {
		t.Error("the transitions table allows a skipped or backward step")
	}
	if !record.CanTransition(record.StatePending, record.StateDraining) {
		t.Error("the successor of a draining job cannot be created draining (PENDING → DRAINING)")
	}
	for i, st := range steps {
		err := record.Transition(j, st.to, time.Unix(int64(i), 0), "")
		if errcode.Of(err) != st.code && !(err == nil && st.code == "") || j.State != st.want {
			t.Errorf("step %d → %s: err %v, state %s; want code %q, state %s", i, st.to, err, j.State, st.code, st.want)
		}
	}
	var e *Error
	if err := record.Transition(j, record.StateRunning, time.Now(), ""); !errors.As(err, &e) {
		t.Errorf("transition error %T is not an *Error", err)
	}
}

// TestDeadLetterWithoutBroker: a server job does not fail on an element
// that fails in a step without error_handling; with no broker the reject
// is counted and described in the job.
func TestDeadLetterWithoutBroker(t *testing.T) {
	t.Parallel()
	s := openService(t, t.TempDir())
	const failing = `pipeline:
  transforms:
    - type: Create
      name: Transactions
      config:
        elements: [{region: NORTH, amount: 250}, {region: UNKNOWN, amount: 50}]
    - type: Validate
      name: CheckRegion
      input: Transactions
      config:
        rules:
          known_region: region in ["NORTH", "WEST"]
`
	j := waitState(t, s, submit(t, s, "failing", failing, t.TempDir()).ID, record.StateDone)
	if j.State != record.StateDone || j.DeadLetters != 1 || !strings.Contains(j.LastDeadLetter, "known_region") {
		t.Errorf("state %s (error %q), dead letters %d (%q)", j.State, j.Error, j.DeadLetters, j.LastDeadLetter)
	}
	if j.Metrics.DeadLetters != 1 {
		t.Errorf("final metrics count %d dead letters", j.Metrics.DeadLetters)
	}
}
