package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/service"
)

// The snapshot benchmark (`weir bench snapshot`): a YAML job in the job
// service (ReadFromPubSub → Combine count per key → WriteToSql upsert)
// holding Keys keys of state under a steady load, with the service's
// periodic checkpoint every CheckpointInterval. In one run it measures:
//
//   - the pause of a periodic checkpoint: the longest time the job read
//     nothing over a stretch of steady load with periodic checkpoints only;
//   - the pause while a job snapshot is taken: the same measure from the
//     snapshot request until the snapshot is READY (the cut and the copy);
//   - the time to READY and disk_size_bytes;
//   - export (to a file) and import (into a fresh data directory) in MB/s
//     of the snapshot file, and the import's peak heap growth;
//   - restore from checkpoint (the service stopped and opened again) and
//     create-from-snapshot (the job cancelled, a new job of the name from
//     the snapshot), each as the time from the request to the first
//     element the new execution read.
//
// At the end the job started from the snapshot is drained and the table
// is checked: the per-key counts add up to the messages published, so the
// snapshot, the rewind to its positions and the hand-over of the sink lost
// and duplicated nothing.

const (
	snapshotBenchJob   = "bench-snapshot"
	snapshotBenchTopic = "bench-snapshot-events"
)

// SnapshotConfig configures one run of the snapshot benchmark.
type SnapshotConfig struct {
	Keys int64
	// Rate is the steady load in messages per second. Default 20,000.
	Rate float64
	// Workers is the job's worker count. Default 2.
	Workers int
	// Dir holds the broker, the data directories and the snapshot file.
	Dir string
	// Steady is how long each stretch of steady load runs. Default 2s.
	Steady time.Duration
	// CheckpointInterval is the service's periodic checkpoint interval.
	// Default 1s.
	CheckpointInterval time.Duration
}

func (c *SnapshotConfig) ensureDefaults() {
	if c.Rate <= 0 {
		c.Rate = 20000
	}
	if c.Workers <= 0 {
		c.Workers = 2
	}
	if c.Steady <= 0 {
		c.Steady = 2 * time.Second
	}
	if c.CheckpointInterval <= 0 {
		c.CheckpointInterval = time.Second
	}
}

// SnapshotOutcome is what one run of the snapshot benchmark measured.
// Times are in milliseconds, sizes in bytes, throughput in MB/s (10^6).
type SnapshotOutcome struct {
	Keys        int64   `json:"keys"`
	FillSeconds float64 `json:"fill_s"`
	// CheckpointPauseMillis is the longest gap over a stretch of steady
	// load with periodic checkpoints only (at least two of them).
	CheckpointPauseMillis float64 `json:"checkpoint_pause_ms"`
	// SnapshotPauseMillis is the longest gap from the snapshot request
	// until it was READY (periodic checkpoints go on meanwhile).
	SnapshotPauseMillis float64 `json:"snapshot_pause_ms"`
	// CutPauseMillis and CopyPauseMillis split SnapshotPauseMillis: the
	// longest gap while the cut was taken (the request) and while the
	// state was copied afterwards (until READY).
	CutPauseMillis  float64 `json:"cut_pause_ms"`
	CopyPauseMillis float64 `json:"copy_pause_ms"`
	// PauseRatio is SnapshotPauseMillis over CheckpointPauseMillis.
	PauseRatio float64 `json:"pause_ratio"`
	// CutMillis is how long the snapshot request took (the cut).
	CutMillis float64 `json:"cut_ms"`
	// ReadyMillis is the time from the request to READY.
	ReadyMillis   float64 `json:"ready_ms"`
	DiskSizeBytes int64   `json:"disk_size_bytes"`
	// FileBytes is the size of the exported snapshot file.
	FileBytes    int64   `json:"file_bytes"`
	ExportMillis float64 `json:"export_ms"`
	ExportMBps   float64 `json:"export_mb_per_s"`
	ImportMillis float64 `json:"import_ms"`
	ImportMBps   float64 `json:"import_mb_per_s"`
	// ImportHeapPeakBytes is the largest growth of the process's Go heap
	// in use during the import over the heap before it. The job keeps
	// running in the same process, so its garbage counts too: an upper
	// bound (service.TestImportMemory measures an import alone).
	ImportHeapPeakBytes int64 `json:"import_heap_peak_bytes"`
	// RestoreFirstMillis: the service stopped and opened again, from the
	// start of Open to the first element the resumed job read.
	RestoreFirstMillis float64 `json:"restore_first_element_ms"`
	// FromSnapshotFirstMillis: from the create-from-snapshot request to
	// the first element the new job read.
	FromSnapshotFirstMillis float64 `json:"from_snapshot_first_element_ms"`
	// RestoreKeysPerSec and FromSnapshotKeysPerSec are Keys over
	// RestoreFirstMillis and FromSnapshotFirstMillis: the keys of state a
	// restart and a create-from-snapshot brought back per second, counting
	// everything before the first element (the service's Open, the copy
	// of the snapshot into the new job's state) as restore time.
	RestoreKeysPerSec      float64 `json:"restore_keys_per_sec"`
	FromSnapshotKeysPerSec float64 `json:"from_snapshot_keys_per_sec"`
	// Elements is how many messages were published (the topic's count).
	Elements int64 `json:"elements"`
	// PublisherSent is how many messages the publisher counted as
	// acknowledged by the broker; TopicLastSeq the topic's last sequence.
	PublisherSent int64 `json:"publisher_sent"`
	TopicLastSeq  int64 `json:"topic_last_seq"`
	// TopicSettleMillis is how long the topic's info took to count every
	// message the publisher had acknowledged (see settledTopic).
	TopicSettleMillis float64 `json:"topic_settle_ms"`
	// Verified says the table's per-key counts add up to Elements.
	Verified bool `json:"verified"`
	// Error is why the run failed, when it got as far as its figures.
	Error string `json:"error,omitempty"`
}

// SnapshotPipelineYAML is the benchmark's job, writing to the SQLite
// database dsn.
func SnapshotPipelineYAML(dsn string) string {
	return fmt.Sprintf(`# weir bench snapshot.
pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Events
      config:
        topic: %s
        schema: {key: int}
    - type: Combine
      name: CountByKey
      input: Events
      config:
        group_by: [key]
        combine:
          n: {value: key, fn: count}
    - type: WriteToSql
      name: Totals
      input: CountByKey
      config: {driver: sqlite, dsn: %q, table: totals, key: [key], mode: upsert}
`, snapshotBenchTopic, dsn)
}

func millisSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

func mbPerSecond(bytes int64, ms float64) float64 { return perSecond(bytes, ms) / 1e6 }

// firstElement waits until a live execution of job name other than
// (notID, notStarted) has read an element, and returns when it saw it.
func firstElement(ctx context.Context, svc *service.Service, name, notID string, notStarted time.Time, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	for {
		p, ok := svc.ElementsRead(name)
		if ok && p.Read > 0 && (p.JobID != notID || !p.Started.Equal(notStarted)) {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("job %s read nothing within %s", name, limit)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(gapPoll):
		}
	}
}

// heapPeak samples the Go heap in use until stop is closed and returns
// the largest growth over base.
func heapPeak(stop <-chan struct{}, base uint64) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		var peak uint64
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-stop:
				if peak < base {
					peak = base
				}
				out <- int64(peak - base)
				return
			case <-t.C:
			}
		}
	}()
	return out
}

// RunSnapshot runs the snapshot benchmark once in this process.
func RunSnapshot(ctx context.Context, cfg SnapshotConfig) (SnapshotOutcome, error) {
	cfg.ensureDefaults()
	out := SnapshotOutcome{Keys: cfg.Keys}
	if cfg.Keys < 1 || cfg.Dir == "" {
		return out, errors.New("snapshot bench: keys must be positive and a directory given")
	}
	logger := slog.New(discardHandler{})
	b, stopBroker, err := startBenchBroker(ctx, pubsub.Options{StoreDir: filepath.Join(cfg.Dir, "broker"), Logger: logger}, snapshotBenchTopic)
	if err != nil {
		return out, err
	}
	defer stopBroker()
	sopts := service.Options{DataDir: filepath.Join(cfg.Dir, "data"), Logger: logger, Broker: b, CheckpointInterval: cfg.CheckpointInterval}
	svc, err := service.Open(ctx, sopts)
	if err != nil {
		return out, err
	}
	defer func() { svc.Close(context.WithoutCancel(ctx)) }()
	dbPath := filepath.Join(cfg.Dir, "totals.db")
	req := service.SubmitRequest{Name: snapshotBenchJob, Pipeline: SnapshotPipelineYAML(dbPath), PipelineFile: "bench-snapshot.yaml",
		BaseDir: cfg.Dir, Options: record.JobOptions{NumWorkers: cfg.Workers}}
	start, mon, stopMon, err := submitWatched(ctx, svc, req)
	if err != nil {
		return out, err
	}
	defer stopMon()

	// Fill: one message per key.
	pub, err := newAsyncPublisher(b, snapshotBenchTopic)
	if err != nil {
		return out, err
	}
	if err := fillKeys(ctx, svc, pub, snapshotBenchJob, cfg.Keys, start); err != nil {
		return out, err
	}
	fillLimit := fillTimeout(cfg.Keys)
	out.FillSeconds = time.Since(start).Seconds()

	// Steady load, with the service's periodic checkpoints.
	pubCtx, stopPub := context.WithCancel(ctx)
	defer stopPub()
	var next atomic.Int64
	pubErr := make(chan error, 1)
	go func() { pubErr <- steadyPublisher(pubCtx, pub, cfg.Keys, cfg.Rate, &next) }()
	published := false
	stopPublisher := func() error {
		if published {
			return nil
		}
		published = true
		stopPub()
		return <-pubErr
	}
	defer stopPublisher()
	stretch := max(cfg.Steady, 2*cfg.CheckpointInterval+cfg.CheckpointInterval/2)
	time.Sleep(stretch) // the first checkpoints after the fill hold every key
	mon.reset()
	time.Sleep(stretch)
	out.CheckpointPauseMillis = float64(mon.reset().Microseconds()) / 1000

	// marks are the topic's last sequence at each step, for the report of
	// a mismatch.
	var marks []string
	mark := func(what string) {
		if ti, err := b.Topic(ctx, snapshotBenchTopic); err == nil {
			marks = append(marks, fmt.Sprintf("%s@%d", what, ti.LastSeq))
		}
	}

	// The snapshot.
	mark("snapshot-request")
	reqAt := time.Now()
	snap, err := svc.CreateSnapshot(ctx, service.SnapshotRequest{Job: snapshotBenchJob, Description: "weir bench snapshot"})
	if err != nil {
		return out, fmt.Errorf("taking the snapshot: %w", err)
	}
	out.CutMillis = millisSince(reqAt)
	out.CutPauseMillis = float64(mon.reset().Microseconds()) / 1000
	if snap, err = svc.WaitSnapshot(ctx, snap.ID); err != nil {
		return out, err
	}
	out.ReadyMillis = millisSince(reqAt)
	out.CopyPauseMillis = float64(mon.reset().Microseconds()) / 1000
	out.SnapshotPauseMillis = max(out.CutPauseMillis, out.CopyPauseMillis)
	if snap.State != record.SnapshotReady {
		return out, fmt.Errorf("the snapshot ended %s: %s", snap.State, snap.FailureReason)
	}
	out.DiskSizeBytes = snap.DiskSizeBytes
	mark("ready")
	if ps := snap.Positions["Events"]; len(ps) == 1 {
		var pos struct {
			StreamSeq uint64 `json:"stream_seq"`
		}
		if json.Unmarshal(ps[0], &pos) == nil {
			marks = append(marks, fmt.Sprintf("cut@%d", pos.StreamSeq))
		}
	}
	if out.CheckpointPauseMillis > 0 {
		out.PauseRatio = out.SnapshotPauseMillis / out.CheckpointPauseMillis
	}

	// Export to a file, import into a fresh data directory.
	file := filepath.Join(cfg.Dir, "snapshot.weirsnap")
	if err := exportTo(ctx, svc, snap.ID, file, &out); err != nil {
		return out, err
	}
	if err := importFrom(ctx, file, filepath.Join(cfg.Dir, "imported"), logger, snap, &out); err != nil {
		return out, err
	}

	// Restore from checkpoint: stop the service (every job checkpoints),
	// open it again, wait for the job's first element.
	mark("close")
	if err := svc.Close(ctx); err != nil {
		return out, fmt.Errorf("stopping the service: %w", err)
	}
	openAt := time.Now()
	if svc, err = service.Open(ctx, sopts); err != nil {
		return out, fmt.Errorf("reopening the service: %w", err)
	}
	mon.svc.Store(svc)
	at, err := firstElement(ctx, svc, snapshotBenchJob, "", time.Time{}, fillLimit)
	if err != nil {
		return out, fmt.Errorf("restoring from checkpoint: %w", err)
	}
	out.RestoreFirstMillis = float64(at.Sub(openAt).Microseconds()) / 1000

	// Create from snapshot: cancel the job, start a new job of the name
	// from the snapshot (the subscription rewinds to the cut).
	mark("cancel")
	old, _ := svc.ElementsRead(snapshotBenchJob)
	cancelled, err := svc.Cancel(ctx, snapshotBenchJob)
	if err != nil {
		return out, fmt.Errorf("cancelling the job: %w", err)
	}
	if _, err := svc.WaitJob(ctx, cancelled.ID); err != nil {
		return out, err
	}
	mark("create-from-snapshot")
	fromAt := time.Now()
	if _, err := svc.CreateFromSnapshot(ctx, service.FromSnapshotRequest{SubmitRequest: req, SnapshotID: snap.ID}); err != nil {
		return out, fmt.Errorf("creating a job from the snapshot: %w", err)
	}
	if at, err = firstElement(ctx, svc, snapshotBenchJob, old.JobID, old.Started, fillLimit); err != nil {
		return out, fmt.Errorf("creating from the snapshot: %w", err)
	}
	out.FromSnapshotFirstMillis = float64(at.Sub(fromAt).Microseconds()) / 1000
	out.RestoreKeysPerSec = perSecond(cfg.Keys, out.RestoreFirstMillis)
	out.FromSnapshotKeysPerSec = perSecond(cfg.Keys, out.FromSnapshotFirstMillis)

	// Check: drain the new job once everything is published and read.
	time.Sleep(cfg.Steady / 2)
	if err := stopPublisher(); err != nil {
		return out, err
	}
	// Ground truth: the messages the topic holds (what the jobs could
	// read). The publisher's own count is reported beside it.
	out.PublisherSent = cfg.Keys + next.Load()
	settleAt := time.Now()
	ti, err := settledTopic(ctx, b, uint64(out.PublisherSent))
	out.TopicSettleMillis = millisSince(settleAt)
	if err != nil {
		return out, err
	}
	out.Elements = int64(ti.Messages)
	out.TopicLastSeq = int64(ti.LastSeq)
	if ti.FirstSeq != 1 || ti.LastSeq != ti.Messages {
		return out, fmt.Errorf("%w: the topic holds %d messages, sequences %d to %d", ErrMismatch, ti.Messages, ti.FirstSeq, ti.LastSeq)
	}
	j, err := svc.Get(snapshotBenchJob)
	if err != nil {
		return out, err
	}
	if err := waitBacklogRead(ctx, b, snapshotBenchJob, fillLimit); err != nil {
		return out, err
	}
	if _, err := svc.Drain(ctx, j.ID); err != nil {
		return out, fmt.Errorf("draining the job: %w", err)
	}
	if j, err = svc.WaitJob(ctx, j.ID); err != nil {
		return out, err
	}
	if j.State != record.StateDrained {
		return out, fmt.Errorf("the job started from the snapshot ended %s: %s", j.State, j.Error)
	}
	total, err := sumCounts(ctx, dbPath)
	if err != nil {
		return out, err
	}
	out.Verified = total == out.Elements
	if !out.Verified {
		return out, fmt.Errorf("%w: the per-key counts add up to %d, but %d messages were published (topic sequences: %s; %s)",
			ErrMismatch, total, out.Elements, strings.Join(marks, " "), diagnoseCounts(ctx, dbPath, cfg.Keys, out.Elements))
	}
	return out, nil
}

// exportTo exports snapshot id to file and records the throughput.
func exportTo(ctx context.Context, svc *service.Service, id, file string, out *SnapshotOutcome) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	at := time.Now()
	info, err := svc.ExportSnapshot(ctx, id, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("exporting the snapshot: %w", err)
	}
	out.ExportMillis = millisSince(at)
	out.FileBytes = info.Bytes
	out.ExportMBps = mbPerSecond(info.Bytes, out.ExportMillis)
	return nil
}

// importFrom imports file into a service on the fresh data directory dir,
// records the throughput and peak heap growth, and checks the imported
// snapshot against the exported one.
func importFrom(ctx context.Context, file, dir string, logger *slog.Logger, want *record.Snapshot, out *SnapshotOutcome) error {
	isvc, err := service.Open(ctx, service.Options{DataDir: dir, Logger: logger})
	if err != nil {
		return err
	}
	defer isvc.Close(context.WithoutCancel(ctx))
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	stop := make(chan struct{})
	peak := heapPeak(stop, ms.HeapInuse)
	at := time.Now()
	got, err := isvc.ImportSnapshot(ctx, f, 0)
	out.ImportMillis = millisSince(at)
	close(stop)
	out.ImportHeapPeakBytes = <-peak
	if err != nil {
		return fmt.Errorf("importing the snapshot: %w", err)
	}
	out.ImportMBps = mbPerSecond(out.FileBytes, out.ImportMillis)
	if got.ID != want.ID || got.State != record.SnapshotReady || got.DiskSizeBytes != want.DiskSizeBytes {
		return fmt.Errorf("%w: imported snapshot %s is %s with %d bytes, exported %s had %d", ErrMismatch, got.ID, got.State, got.DiskSizeBytes, want.ID, want.DiskSizeBytes)
	}
	return nil
}

// settledTopic reads the topic's info until it holds sent messages, for
// up to 30 s (its counts were seen to lag the publisher's acknowledged
// messages by a few hundred under load), and returns the last read.
func settledTopic(ctx context.Context, b *pubsub.Broker, sent uint64) (pubsub.TopicInfo, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ti, err := b.Topic(ctx, snapshotBenchTopic)
		if err != nil || ti.Messages >= sent || time.Now().After(deadline) {
			return ti, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitBacklogRead waits until job's subscription has no message left
// unacknowledged: everything published was read and checkpointed.
func waitBacklogRead(ctx context.Context, b *pubsub.Broker, job string, limit time.Duration) error {
	sub := pubsub.SubscriptionName(job, "Events")
	deadline := time.Now().Add(limit)
	for {
		info, err := b.Subscription(ctx, sub)
		if err != nil {
			return err
		}
		n := info.Backlog
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("subscription %s still has %d messages to read after %s", sub, n, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sumCounts adds up the per-key counts of the table.
func sumCounts(ctx context.Context, path string) (int64, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var total sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT SUM(n) FROM totals`).Scan(&total); err != nil {
		return 0, fmt.Errorf("reading the totals: %w", err)
	}
	return total.Int64, nil
}

// keyOfSeq is the key of the message at topic sequence seq (from 1): the
// fill publishes keys 0..keys-1 in order, then steadyPublisher's order.
func keyOfSeq(seq uint64, keys int64) int64 {
	if int64(seq) <= keys {
		return int64(seq) - 1
	}
	i := int64(seq) - keys - 1
	return (i * 2654435761) % keys
}

// diagnoseCounts compares the table's per-key counts with those of the
// published messages and describes the difference: how many keys are
// over and under, and for a few over-counted keys the sequences of their
// messages (which shows the stretch read twice).
func diagnoseCounts(ctx context.Context, path string, keys, messages int64) string {
	want := make([]int64, keys)
	seqs := map[int64][]uint64{}
	for seq := uint64(1); seq <= uint64(messages); seq++ {
		want[keyOfSeq(seq, keys)]++
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return err.Error()
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT key, n FROM totals`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	got := make([]int64, keys)
	for rows.Next() {
		var k, n int64
		if err := rows.Scan(&k, &n); err != nil {
			return err.Error()
		}
		if k >= 0 && k < keys {
			got[k] = n
		}
	}
	var over, under, excess int64
	var sample []int64
	for k := range want {
		switch d := got[k] - want[k]; {
		case d > 0:
			over, excess = over+1, excess+d
			if len(sample) < 4 {
				sample = append(sample, int64(k))
			}
		case d < 0:
			under++
		}
	}
	for seq := uint64(1); seq <= uint64(messages); seq++ {
		if k := keyOfSeq(seq, keys); slices.Contains(sample, k) {
			seqs[k] = append(seqs[k], seq)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d keys over by %d in all, %d under", over, excess, under)
	for _, k := range sample {
		fmt.Fprintf(&b, "; key %d: %d counted, %d published at sequences %v", k, got[k], want[k], seqs[k])
	}
	return b.String()
}

// perSecond is n over ms milliseconds, per second; 0 when ms is not
// positive.
func perSecond(n int64, ms float64) float64 {
	if ms <= 0 {
		return 0
	}
	return float64(n) / (ms / 1000)
}
