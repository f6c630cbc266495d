package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/weir-dev/weir/runner/contract"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner"
	"github.com/weir-dev/weir/state"
	"github.com/weir-dev/weir/yamlpipe"
)

// Tunables of the children.
const (
	// publishWindow is how many asynchronous publishes the publishers keep
	// awaiting the server's acknowledgement.
	publishWindow = 4096
	// rawBatch is the raw consumer's pull batch (the pipeline's source
	// pulls one bundle, 1,024 messages, at a time).
	rawBatch = 4096
	// benchAckWait is the AckWait of the benchmark's subscriptions: longer
	// than any run, so that the final-checkpoint variant, which
	// acknowledges nothing until the end, sees no redeliveries.
	benchAckWait = 2 * time.Hour
	// progressPoll is how often the pipeline children read the metrics.
	progressPoll = 10 * time.Millisecond
	// stallTimeout fails a pipeline child that makes no progress.
	stallTimeout = 2 * time.Minute
	// brokerShutdownTimeout bounds the broker's clean shutdown.
	brokerShutdownTimeout = time.Minute
)

// Step and table names of the benchmark pipelines.
const (
	sourceStepPS = "Events"
	sumsTable    = "sums"
	eventsTable  = "events"
	benchJobName = "bench-pubsub-to-sql"
)

// RunPubSubChild is the body of a pubsub-to-sql child process: it runs
// variant v (run number run) of cfg in this process and writes its outcome
// as one line of JSON to w. dir is the shared directory holding the broker
// store that the publish variant fills and the consuming variants reopen.
func RunPubSubChild(ctx context.Context, v PubSubVariant, run int, cfg PubSubConfig, dir string, w io.Writer, logger *slog.Logger) error {
	o, err := RunPubSub(ctx, v, run, cfg, dir, logger)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(w).Encode(o); err != nil {
		return fmt.Errorf("writing the outcome: %w", err)
	}
	return nil
}

// RunPubSub runs variant v of cfg in this process. The pipeline variants
// check the SQL table against the published messages and fail, wrapping
// ErrMismatch, when it differs.
func RunPubSub(ctx context.Context, v PubSubVariant, run int, cfg PubSubConfig, dir string, logger *slog.Logger) (PubSubOutcome, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return PubSubOutcome{}, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	if dir == "" {
		return PubSubOutcome{}, errors.New("pubsub-to-sql: no shared directory for the broker store")
	}
	brokerDir := filepath.Join(dir, brokerDirName)
	if v == VariantLatency {
		// Its own broker: the latency run publishes live, and need not load
		// the pre-published stream.
		brokerDir = filepath.Join(dir, fmt.Sprintf("latency-broker-r%d", run))
		defer os.RemoveAll(brokerDir)
	}
	// The broker's own logs are noise below debug level.
	brokerLog := logger
	if !logger.Handler().Enabled(ctx, slog.LevelDebug) {
		brokerLog = slog.New(discardHandler{})
	}
	b, err := pubsub.StartEmbedded(ctx, pubsub.Options{StoreDir: brokerDir, Logger: brokerLog})
	if err != nil {
		return PubSubOutcome{}, fmt.Errorf("starting the embedded broker: %w", err)
	}
	o, err := runPubSubOn(ctx, b, v, run, cfg, dir, logger)
	sctx, cancel := context.WithTimeout(context.Background(), brokerShutdownTimeout)
	defer cancel()
	if serr := b.Shutdown(sctx); serr != nil && err == nil {
		err = fmt.Errorf("stopping the embedded broker: %w", serr)
	}
	if err != nil {
		return PubSubOutcome{}, err
	}
	o.Variant, o.Run = string(v), run
	return o, nil
}

func runPubSubOn(ctx context.Context, b *pubsub.Broker, v PubSubVariant, run int, cfg PubSubConfig, dir string, logger *slog.Logger) (PubSubOutcome, error) {
	if v == VariantPublish {
		return publishAll(ctx, b, cfg)
	}
	if v.needsPublished() {
		info, err := b.Topic(ctx, pubsubTopic)
		if err != nil {
			return PubSubOutcome{}, fmt.Errorf("the pre-published topic: %w", err)
		}
		if int64(info.Messages) != cfg.Messages {
			return PubSubOutcome{}, fmt.Errorf("%w: the topic holds %d messages, want %d", ErrMismatch, info.Messages, cfg.Messages)
		}
	}
	if v == VariantRehearse {
		// A rehearsal reads the topic by sequence: no subscription.
		return runRehearsal(ctx, b, cfg, dir, logger)
	}
	sub := fmt.Sprintf("%s-r%d", v, run)
	if v == VariantLatency {
		if _, err := b.CreateTopic(ctx, pubsubTopic, pubsub.TopicConfig{}); err != nil {
			return PubSubOutcome{}, err
		}
	}
	if v == VariantPipelineFinalCP {
		// Without intermediate commits an AckAll consumer would track every
		// delivered message as pending, which slows the broker down as the
		// backlog grows: the reference reads through a consumer that needs
		// no acknowledgements, so that the comparison isolates what the
		// checkpoints (and the acknowledgements they send) cost.
		if err := createNoAckSubscription(ctx, b, sub); err != nil {
			return PubSubOutcome{}, err
		}
	} else if _, err := b.CreateSubscription(ctx, sub, pubsubTopic, pubsub.SubscriptionConfig{FromBeginning: true, AckWait: benchAckWait}); err != nil {
		return PubSubOutcome{}, err
	}
	defer func() {
		// Leave the shared stream as the publisher left it.
		if err := b.DeleteSubscription(context.Background(), sub); err != nil {
			logger.Warn("deleting the benchmark subscription", "subscription", sub, "err", err)
		}
	}()
	work, err := os.MkdirTemp(dir, string(v)+"-")
	if err != nil {
		return PubSubOutcome{}, fmt.Errorf("creating a work directory: %w", err)
	}
	defer os.RemoveAll(work)
	switch v {
	case VariantRaw:
		return consumeRaw(ctx, b, sub, cfg)
	case VariantPipeline, VariantPipelineFinalCP:
		return runSumPipeline(ctx, b, v, sub, cfg, work, logger)
	case VariantLatency:
		return runLatency(ctx, b, sub, cfg, work, logger)
	}
	return PubSubOutcome{}, fmt.Errorf("unknown variant %q", v)
}

// createNoAckSubscription creates subscription sub of the benchmark topic
// as a durable consumer with AckNone: it delivers every message once and
// keeps no pending acknowledgements (acknowledging it is harmless).
func createNoAckSubscription(ctx context.Context, b *pubsub.Broker, sub string) error {
	info, err := b.Topic(ctx, pubsubTopic)
	if err != nil {
		return err
	}
	js, err := jetstream.New(b.Conn())
	if err != nil {
		return fmt.Errorf("opening JetStream: %w", err)
	}
	_, err = js.CreateConsumer(ctx, info.Stream, jetstream.ConsumerConfig{
		Durable:       sub,
		Description:   "weir bench reference subscription without acknowledgements",
		AckPolicy:     jetstream.AckNonePolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
	})
	if err != nil {
		return fmt.Errorf("creating subscription %s: %w", sub, err)
	}
	return nil
}

// discardHandler is a slog.Handler that drops everything.
type discardHandler struct{}

func (discardHandler) Enabled(context.Context, slog.Level) bool  { return false }
func (discardHandler) Handle(context.Context, slog.Record) error { return nil }
func (d discardHandler) WithAttrs([]slog.Attr) slog.Handler      { return d }
func (d discardHandler) WithGroup(string) slog.Handler           { return d }

// asyncPublisher publishes through JetStream with a bounded window of
// acknowledgements in flight, and fails on the first negative one.
type asyncPublisher struct {
	js      jetstream.JetStream
	subject string
	futures []jetstream.PubAckFuture
	head    int
}

func newAsyncPublisher(b *pubsub.Broker, topic string) (*asyncPublisher, error) {
	return newConnPublisher(b.Conn(), topic)
}

// newConnPublisher is newAsyncPublisher over any connection to the broker.
func newConnPublisher(nc *nats.Conn, topic string) (*asyncPublisher, error) {
	subject, err := pubsub.TopicSubject(topic)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*publishWindow))
	if err != nil {
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	return &asyncPublisher{js: js, subject: subject, futures: make([]jetstream.PubAckFuture, 0, 2*publishWindow)}, nil
}

func (p *asyncPublisher) wait(ctx context.Context, f jetstream.PubAckFuture) error {
	select {
	case <-f.Ok():
		return nil
	case err := <-f.Err():
		return fmt.Errorf("publishing to %s: %w", p.subject, err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *asyncPublisher) publish(ctx context.Context, data []byte) error {
	if len(p.futures)-p.head >= publishWindow {
		if err := p.wait(ctx, p.futures[p.head]); err != nil {
			return err
		}
		p.head++
		if p.head >= publishWindow {
			p.futures = append(p.futures[:0], p.futures[p.head:]...)
			p.head = 0
		}
	}
	f, err := p.js.PublishAsync(p.subject, data)
	if err != nil {
		return fmt.Errorf("publishing to %s: %w", p.subject, err)
	}
	p.futures = append(p.futures, f)
	return nil
}

// flush waits for every acknowledgement in flight.
func (p *asyncPublisher) flush(ctx context.Context) error {
	for _, f := range p.futures[p.head:] {
		if err := p.wait(ctx, f); err != nil {
			return err
		}
	}
	p.futures, p.head = p.futures[:0], 0
	return nil
}

// publishAll creates the topic and publishes cfg.Messages event messages.
func publishAll(ctx context.Context, b *pubsub.Broker, cfg PubSubConfig) (PubSubOutcome, error) {
	if _, err := b.CreateTopic(ctx, pubsubTopic, pubsub.TopicConfig{}); err != nil {
		return PubSubOutcome{}, err
	}
	p, err := newAsyncPublisher(b, pubsubTopic)
	if err != nil {
		return PubSubOutcome{}, err
	}
	start, cpu0 := time.Now(), processCPU()
	for i := int64(0); i < cfg.Messages; i++ {
		// Each message gets its own buffer: the client keeps it until the
		// server acknowledges it.
		if err := p.publish(ctx, AppendEventMessage(make([]byte, 0, MessageSize), i, cfg.Keys)); err != nil {
			return PubSubOutcome{}, err
		}
	}
	if err := p.flush(ctx); err != nil {
		return PubSubOutcome{}, err
	}
	o := PubSubOutcome{Messages: cfg.Messages, ElapsedNanos: time.Since(start).Nanoseconds(), CPUNanos: (processCPU() - cpu0).Nanoseconds()}
	info, err := b.Topic(ctx, pubsubTopic)
	if err != nil {
		return PubSubOutcome{}, err
	}
	if int64(info.Messages) != cfg.Messages {
		return PubSubOutcome{}, fmt.Errorf("%w: the topic holds %d messages after publishing %d", ErrMismatch, info.Messages, cfg.Messages)
	}
	return o, nil
}

// consumeRaw fetches every message of subscription sub in batches of
// rawBatch and acknowledges each batch cumulatively (AckAll) through its
// last message; the last acknowledgement waits for the server.
func consumeRaw(ctx context.Context, b *pubsub.Broker, sub string, cfg PubSubConfig) (PubSubOutcome, error) {
	info, err := b.Topic(ctx, pubsubTopic)
	if err != nil {
		return PubSubOutcome{}, err
	}
	js, err := jetstream.New(b.Conn())
	if err != nil {
		return PubSubOutcome{}, fmt.Errorf("opening JetStream: %w", err)
	}
	c, err := js.Consumer(ctx, info.Stream, pubsub.NATSName(sub))
	if err != nil {
		return PubSubOutcome{}, fmt.Errorf("opening subscription %s: %w", sub, err)
	}
	start, cpu0 := time.Now(), processCPU()
	var got, bytes int64
	var last jetstream.Msg
	for got < cfg.Messages {
		// Ask for no more than remains, or the last fetch would wait for
		// its expiry.
		batch, err := c.Fetch(int(min(rawBatch, cfg.Messages-got)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return PubSubOutcome{}, fmt.Errorf("fetching from %s: %w", sub, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			bytes += int64(len(m.Data()))
			last = m
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return PubSubOutcome{}, fmt.Errorf("fetching from %s: %w", sub, err)
		}
		if n == 0 {
			return PubSubOutcome{}, fmt.Errorf("%w: subscription %s ran dry after %d of %d messages", ErrMismatch, sub, got, cfg.Messages)
		}
		got += int64(n)
		if got < cfg.Messages {
			if err := last.Ack(); err != nil {
				return PubSubOutcome{}, fmt.Errorf("acknowledging %s: %w", sub, err)
			}
		}
	}
	if err := last.DoubleAck(ctx); err != nil {
		return PubSubOutcome{}, fmt.Errorf("acknowledging %s: %w", sub, err)
	}
	o := PubSubOutcome{Messages: got, ElapsedNanos: time.Since(start).Nanoseconds(), CPUNanos: (processCPU() - cpu0).Nanoseconds()}
	si, err := b.Subscription(ctx, sub)
	if err != nil {
		return PubSubOutcome{}, err
	}
	if got != cfg.Messages || si.AckFloor != info.LastSeq || bytes < cfg.Messages*MessageSize {
		return PubSubOutcome{}, fmt.Errorf("%w: raw consumer read %d messages (%d bytes) and acknowledged up to %d; want %d messages up to %d",
			ErrMismatch, got, bytes, si.AckFloor, cfg.Messages, info.LastSeq)
	}
	return o, nil
}

// SumPipelineYAML is the pipeline of the pipeline variants: the events of
// subscription sub, fixed windows of size window, per key the sum and the
// count of the amounts, upserted into table sums of the SQLite file db.
func SumPipelineYAML(sub string, window time.Duration, db string) string {
	return fmt.Sprintf(`# weir bench pubsub-to-sql, pipeline variant.
pipeline:
  transforms:
    - type: ReadFromPubSub
      name: %s
      config:
        subscription: %s
        schema: {key: string, amount: int, ts: timestamp}
        timestamp_field: ts
    - type: Combine
      name: SumPerKey
      input: %[1]s
      windowing: {type: fixed, size: %[3]ds}
      config:
        group_by: [key]
        combine:
          total: {value: amount, fn: sum}
          n: {value: amount, fn: count}
    - type: WriteToSql
      name: WriteSums
      input: SumPerKey
      config:
        driver: sqlite
        dsn: %[4]q
        table: %[5]s
        key: [key]
        mode: upsert
`, sourceStepPS, sub, int64(window/time.Second), db, sumsTable)
}

// LatencyPipelineYAML is the stateless pipeline of the latency variant:
// the probes of subscription sub appended to table events of db.
func LatencyPipelineYAML(sub, db string) string {
	return fmt.Sprintf(`# weir bench pubsub-to-sql, latency variant.
pipeline:
  transforms:
    - type: ReadFromPubSub
      name: %s
      config:
        subscription: %s
        schema: {seq: int, pub_us: int}
    - type: WriteToSql
      name: WriteEvents
      input: %[1]s
      config:
        driver: sqlite
        dsn: %[3]q
        table: %[4]s
        mode: append
`, sourceStepPS, sub, db, eventsTable)
}

// checkpointer takes checkpoints as the job service does: Checkpoint, write
// it to the state store, Commit; and keeps their durations.
type checkpointer struct {
	x     *runner.Execution
	store *state.Store
	job   *yamlpipe.JobEnv
	// after, when set, runs after each commit with the time it returned.
	after func(committed time.Time) error
	// noAck says the source reads an AckNone subscription, whose
	// acknowledgements nobody answers: Commit's sinks commit first, so the
	// acknowledgement error that follows is expected and ignored.
	noAck bool

	n                    int
	total, barrier, maxD time.Duration
}

func (c *checkpointer) checkpoint(ctx context.Context) error {
	start := time.Now()
	cp, err := c.x.Checkpoint(ctx)
	if err != nil {
		return fmt.Errorf("taking a checkpoint: %w", err)
	}
	barrier := time.Since(start)
	if err := c.store.WriteCheckpoint(c.job.Name, c.job.ID, cp, nil); err != nil {
		return fmt.Errorf("writing checkpoint %d: %w", cp.Epoch, err)
	}
	if err := c.x.Commit(ctx, cp); err != nil && !(c.noAck && errors.Is(err, nats.ErrNoResponders)) {
		return fmt.Errorf("committing checkpoint %d: %w", cp.Epoch, err)
	}
	now := time.Now()
	d := now.Sub(start)
	c.n++
	c.total += d
	c.barrier += barrier
	c.maxD = max(c.maxD, d)
	if c.after != nil {
		return c.after(now)
	}
	return nil
}

func (c *checkpointer) fill(o *PubSubOutcome) {
	o.Checkpoints = c.n
	o.CheckpointNanos = c.total.Nanoseconds()
	o.BarrierNanos = c.barrier.Nanoseconds()
	o.CheckpointMaxNanos = c.maxD.Nanoseconds()
}

// startPipeline loads a YAML pipeline as a job of the embedded broker and
// opens its state store in work.
func startPipeline(b *pubsub.Broker, src, work string, logger *slog.Logger) (*contract.Program, *state.Store, *yamlpipe.JobEnv, error) {
	job := &yamlpipe.JobEnv{Name: benchJobName, ID: "bench-job-1", Generation: 1, DataDir: work, Broker: b}
	p, err := yamlpipe.Load("pubsub-to-sql.yaml", []byte(src), yamlpipe.Options{BaseDir: work, Job: job})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("loading the benchmark pipeline: %w", err)
	}
	store, err := state.Open(filepath.Join(work, "state"), logger)
	if err != nil {
		return nil, nil, nil, err
	}
	return p.Program(), store, job, nil
}

// finish drains x, waits for it, takes the final checkpoint and closes the
// sinks.
func finish(ctx context.Context, x *runner.Execution, cp *checkpointer) error {
	x.Drain()
	if _, err := x.Wait(); err != nil {
		return fmt.Errorf("draining the pipeline: %w", err)
	}
	if err := cp.checkpoint(ctx); err != nil {
		return fmt.Errorf("final checkpoint: %w", err)
	}
	if err := x.CloseSinks(ctx); err != nil {
		return fmt.Errorf("closing the sinks: %w", err)
	}
	return nil
}

// runSumPipeline runs the windowed-sum pipeline over the pre-published
// messages until the source has read them all, then drains it; with
// VariantPipeline it checkpoints every cfg.CheckpointInterval, with
// VariantPipelineFinalCP only once, after the drain. It then checks the
// table against the published messages.
func runSumPipeline(ctx context.Context, b *pubsub.Broker, v PubSubVariant, sub string, cfg PubSubConfig, work string, logger *slog.Logger) (PubSubOutcome, error) {
	db := filepath.Join(work, "sums.sqlite")
	prog, store, job, err := startPipeline(b, SumPipelineYAML(sub, cfg.Window, db), work, logger)
	if err != nil {
		return PubSubOutcome{}, err
	}
	defer store.Close()
	start, cpu0 := time.Now(), processCPU()
	x, err := runner.Start(ctx, prog, runner.Options{NumWorkers: cfg.Workers, Checkpoints: true, Logger: logger})
	if err != nil {
		return PubSubOutcome{}, fmt.Errorf("starting the pipeline: %w", err)
	}
	cp := &checkpointer{x: x, store: store, job: job, noAck: v == VariantPipelineFinalCP}
	var tick <-chan time.Time
	if v == VariantPipeline {
		t := time.NewTicker(cfg.CheckpointInterval)
		defer t.Stop()
		tick = t.C
	}
	poll := time.NewTicker(progressPoll)
	defer poll.Stop()
	var read int64
	lastProgress := time.Now()
	for read < cfg.Messages {
		select {
		case <-tick:
			if err := cp.checkpoint(ctx); err != nil {
				x.Cancel()
				return PubSubOutcome{}, err
			}
		case <-poll.C:
			n := x.Metrics().Step(sourceStepPS).ElementsOut
			if n > read {
				read, lastProgress = n, time.Now()
			} else if time.Since(lastProgress) > stallTimeout {
				x.Cancel()
				return PubSubOutcome{}, fmt.Errorf("the pipeline read nothing for %s (%d of %d messages)", stallTimeout, read, cfg.Messages)
			}
		case <-x.Done():
			_, err := x.Wait()
			return PubSubOutcome{}, fmt.Errorf("the pipeline ended after %d of %d messages: %v", read, cfg.Messages, err)
		case <-ctx.Done():
			x.Cancel()
			return PubSubOutcome{}, ctx.Err()
		}
	}
	if err := finish(ctx, x, cp); err != nil {
		return PubSubOutcome{}, err
	}
	o := PubSubOutcome{Messages: read, ElapsedNanos: time.Since(start).Nanoseconds(), CPUNanos: (processCPU() - cpu0).Nanoseconds()}
	cp.fill(&o)
	if read != cfg.Messages {
		return PubSubOutcome{}, fmt.Errorf("%w: the source read %d messages, %d were published", ErrMismatch, read, cfg.Messages)
	}
	if err := checkSums(ctx, db, cfg, &o); err != nil {
		return PubSubOutcome{}, err
	}
	return o, nil
}

// openSQLite opens the benchmark's SQLite file for reading next to the
// sink's own connection.
func openSQLite(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// checkSums compares table sums of db with the window sums the published
// messages imply, row by row, and fills o's table figures.
func checkSums(ctx context.Context, path string, cfg PubSubConfig, o *PubSubOutcome) error {
	want := ComputeExpectedSums(cfg)
	db, err := openSQLite(path)
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT key, window_start, window_end, total, n FROM `+sumsTable)
	if err != nil {
		return fmt.Errorf("reading table %s: %w", sumsTable, err)
	}
	defer rows.Close()
	size := mtime.FromDuration(cfg.Window)
	var bad []string
	seen := make(map[windowKey]bool, len(want.cells))
	for rows.Next() {
		var key, ws, we string
		var total, n int64
		if err := rows.Scan(&key, &ws, &we, &total, &n); err != nil {
			return fmt.Errorf("reading table %s: %w", sumsTable, err)
		}
		k, ok := parseEventKey(key)
		start, err1 := mtime.Parse(ws)
		end, err2 := mtime.Parse(we)
		if !ok || err1 != nil || err2 != nil || mtime.Duration(end-start) != size {
			return fmt.Errorf("%w: table %s has the row (%q, %q, %q): want key-N and a %s window", ErrMismatch, sumsTable, key, ws, we, cfg.Window)
		}
		wk := windowKey{start: start, key: k}
		c, ok := want.cells[wk]
		if seen[wk] || !ok || c.sum != total || c.n != n {
			if len(bad) < 5 {
				bad = append(bad, fmt.Sprintf("(%s, %s): total %d of %d messages, want %d of %d", key, ws, total, n, c.sum, c.n))
			}
		}
		seen[wk] = true
		o.Rows++
		o.Total += total
		o.Count += n
		o.Checksum += resultMix(start, k, total)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading table %s: %w", sumsTable, err)
	}
	if len(bad) > 0 || o.Rows != want.Rows || o.Total != want.Total || o.Count != want.Count || o.Checksum != want.Checksum {
		return fmt.Errorf("%w: table %s holds %d window sums adding up to %d over %d messages, want %d adding up to %d over %d; first differences: %s",
			ErrMismatch, sumsTable, o.Rows, o.Total, o.Count, want.Rows, want.Total, want.Count, strings.Join(bad, "; "))
	}
	return nil
}

// latencySampler reads, after each commit, the rows the commit added to the
// events table, and records for each the time from its publication to the
// end of the commit.
type latencySampler struct {
	db      *sql.DB
	lastID  int64
	lat     []time.Duration
	seqSum  int64
	tableOK bool
}

func (s *latencySampler) sample(ctx context.Context, committed time.Time) error {
	rows, err := s.db.QueryContext(ctx, `SELECT rowid, seq, pub_us FROM `+eventsTable+` WHERE rowid > ? ORDER BY rowid`, s.lastID)
	if err != nil {
		if !s.tableOK && strings.Contains(err.Error(), "no such table") {
			return nil // the sink creates the table on its first commit
		}
		return fmt.Errorf("sampling table %s: %w", eventsTable, err)
	}
	defer rows.Close()
	s.tableOK = true
	c := committed.UnixMicro()
	for rows.Next() {
		var id, seq, pub int64
		if err := rows.Scan(&id, &seq, &pub); err != nil {
			return fmt.Errorf("sampling table %s: %w", eventsTable, err)
		}
		s.lastID = id
		s.seqSum += seq
		s.lat = append(s.lat, time.Duration(c-pub)*time.Microsecond)
	}
	return rows.Err()
}

// runLatency starts the stateless pipeline, then publishes probes at
// cfg.LatencyRate for cfg.LatencyDuration, each carrying its publish wall
// time, while checkpointing every cfg.CheckpointInterval. After each
// commit it reads the rows the commit made visible: a row's latency is the
// time the commit returned minus its publish time. It stops once every
// probe is in the table.
func runLatency(ctx context.Context, b *pubsub.Broker, sub string, cfg PubSubConfig, work string, logger *slog.Logger) (PubSubOutcome, error) {
	dbPath := filepath.Join(work, "events.sqlite")
	prog, store, job, err := startPipeline(b, LatencyPipelineYAML(sub, dbPath), work, logger)
	if err != nil {
		return PubSubOutcome{}, err
	}
	defer store.Close()
	db, err := openSQLite(dbPath)
	if err != nil {
		return PubSubOutcome{}, err
	}
	defer db.Close()
	start, cpu0 := time.Now(), processCPU()
	x, err := runner.Start(ctx, prog, runner.Options{NumWorkers: cfg.Workers, Checkpoints: true, Logger: logger})
	if err != nil {
		return PubSubOutcome{}, fmt.Errorf("starting the pipeline: %w", err)
	}
	total := int64(cfg.LatencyRate) * int64(cfg.LatencyDuration/time.Millisecond) / 1000
	s := &latencySampler{db: db, lat: make([]time.Duration, 0, total)}
	cp := &checkpointer{x: x, store: store, job: job, after: func(t time.Time) error { return s.sample(ctx, t) }}

	// The publisher runs in its own goroutine; the checkpoints in this one.
	type pubResult struct {
		n   int64
		d   time.Duration
		err error
	}
	pubDone := make(chan pubResult, 1)
	pctx, stopPub := context.WithCancel(ctx)
	defer stopPub()
	go func() {
		n, d, err := publishPaced(pctx, b, cfg.LatencyRate, total)
		pubDone <- pubResult{n, d, err}
	}()
	t := time.NewTicker(cfg.CheckpointInterval)
	defer t.Stop()
	published := int64(-1) // unknown until the publisher is done
	var pubElapsed time.Duration
	lastProgress, lastCount := time.Now(), 0
	for published < 0 || int64(len(s.lat)) < published {
		select {
		case r := <-pubDone:
			if r.err != nil {
				x.Cancel()
				return PubSubOutcome{}, fmt.Errorf("publishing probes: %w", r.err)
			}
			published, pubElapsed = r.n, r.d
		case <-t.C:
			if err := cp.checkpoint(ctx); err != nil {
				x.Cancel()
				return PubSubOutcome{}, err
			}
			if len(s.lat) > lastCount {
				lastCount, lastProgress = len(s.lat), time.Now()
			} else if time.Since(lastProgress) > stallTimeout {
				x.Cancel()
				return PubSubOutcome{}, fmt.Errorf("no probe reached the table for %s (%d so far)", stallTimeout, len(s.lat))
			}
		case <-x.Done():
			_, err := x.Wait()
			return PubSubOutcome{}, fmt.Errorf("the pipeline ended early: %v", err)
		case <-ctx.Done():
			x.Cancel()
			return PubSubOutcome{}, ctx.Err()
		}
	}
	if err := finish(ctx, x, cp); err != nil {
		return PubSubOutcome{}, err
	}
	o := PubSubOutcome{Messages: published, ElapsedNanos: time.Since(start).Nanoseconds(), CPUNanos: (processCPU() - cpu0).Nanoseconds(),
		PublishNanos: pubElapsed.Nanoseconds(), Samples: int64(len(s.lat))}
	cp.fill(&o)
	if int64(len(s.lat)) != published || s.seqSum != published*(published-1)/2 {
		return PubSubOutcome{}, fmt.Errorf("%w: the table holds %d probes (sequence numbers adding up to %d), %d were published (adding up to %d)",
			ErrMismatch, len(s.lat), s.seqSum, published, published*(published-1)/2)
	}
	var rows int64
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+eventsTable).Scan(&rows); err != nil {
		return PubSubOutcome{}, fmt.Errorf("counting table %s: %w", eventsTable, err)
	}
	if rows != published {
		return PubSubOutcome{}, fmt.Errorf("%w: the table holds %d probes after the drain, %d were published", ErrMismatch, rows, published)
	}
	o.Rows = rows
	slices.Sort(s.lat)
	o.LatencyP50Nanos = percentile(s.lat, 0.50).Nanoseconds()
	o.LatencyP99Nanos = percentile(s.lat, 0.99).Nanoseconds()
	o.LatencyMaxNanos = s.lat[len(s.lat)-1].Nanoseconds()
	return o, nil
}

// percentile returns the q-quantile of sorted (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// publishPaced publishes total probes at rate messages per second, each
// stamped with its publish wall time, and returns how many it published
// and how long it took.
func publishPaced(ctx context.Context, b *pubsub.Broker, rate int, total int64) (int64, time.Duration, error) {
	p, err := newAsyncPublisher(b, pubsubTopic)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	var n int64
	for n < total {
		due := min(int64(time.Since(start).Seconds()*float64(rate)), total)
		for ; n < due; n++ {
			msg := appendLatencyMessage(make([]byte, 0, MessageSize), n, time.Now().UnixMicro())
			if err := p.publish(ctx, msg); err != nil {
				return n, time.Since(start), err
			}
		}
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return n, time.Since(start), ctx.Err()
		}
	}
	if err := p.flush(ctx); err != nil {
		return n, time.Since(start), err
	}
	return n, time.Since(start), nil
}
