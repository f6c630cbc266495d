package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/nexmark"
	"github.com/weir-dev/weir/service"
	"github.com/weir-dev/weir/service/record"
)

// Throughput during change (`weir bench nexmark --change`): a Nexmark
// query written in YAML (or in Go, ChangeConfig.SDK: nexchange_sdk.go)
// runs as a job of an in-process job service, its
// source rate-limited to a fixed rate with wall-clock event times, its
// results written to a topic of the embedded broker; during the run the
// job is updated in place, rescaled and snapshotted, and the harness
// samples the events the job reads and the latency of its results.

// The kinds of change ChangeConfig.Changes names.
const (
	ChangeUpdate   = "update"
	ChangeRescale  = "rescale"
	ChangeSnapshot = "snapshot"
)

const (
	changeJob   = "bench-nexmark-change"
	changeTopic = "bench-nexmark-change-out"
	// changeGrace is how long a run goes on past its duration while a
	// change has seen no output after it.
	changeGrace = 30 * time.Second
)

// ChangeConfig configures RunNexmarkChange.
type ChangeConfig struct {
	// Query is the YAML query (NexmarkYAMLQueries), or with SDK the Go
	// query (ChangeSDKQueries); default q5.
	Query string
	// SDK runs the query of package nexmark, written with the Go SDK, as
	// the job of a Go program, instead of the YAML one; its windows are
	// then whole seconds.
	SDK bool
	// Rate is the source's rate, events per second; 0 runs the source as
	// fast as it can (to measure the job's maximum rate: no changes then).
	Rate float64
	// Duration is the length of the run; the changes are evenly spaced
	// within it. Default 60s.
	Duration time.Duration
	// Changes are the changes to make, in order (ChangeUpdate,
	// ChangeRescale, ChangeSnapshot; a kind may repeat).
	Changes []string
	// Workers is the job's worker count at the start; default 1. A
	// rescale goes from 1 worker to 2, and from more to 1.
	Workers int
	// Sample is the throughput sampling interval; default 100 ms.
	Sample time.Duration
	// WindowSize and WindowPeriod are q5's sliding windows; default 2s
	// and 1s (results every second).
	WindowSize, WindowPeriod time.Duration
	// CheckpointInterval is the service's checkpoint interval (the sink
	// publishes what a checkpoint covers when it commits); default 1s.
	CheckpointInterval time.Duration
	// Dir holds the broker's and the service's data (required).
	Dir string
}

func (c *ChangeConfig) ensureDefaults() {
	if c.Query == "" {
		c.Query = "q5"
	}
	if c.Duration <= 0 {
		c.Duration = time.Minute
	}
	if c.Workers <= 0 {
		c.Workers = 1
	}
	if c.Sample <= 0 {
		c.Sample = 100 * time.Millisecond
	}
	if c.WindowSize <= 0 {
		c.WindowSize = 2 * time.Second
	}
	if c.WindowPeriod <= 0 {
		c.WindowPeriod = time.Second
	}
	if c.CheckpointInterval <= 0 {
		c.CheckpointInterval = time.Second
	}
}

// ChangeJobYAML is the job of RunNexmarkChange: query q over a Nexmark
// source rate-limited to rate events per second with wall-clock event
// times (rate 0: as fast as it can), each result stamped with its timestamp (ts: the event's time, or
// the end of the result's window) and gen, written to the result topic.
// An in-place update raises gen: a compatible change whose effect shows in
// the results.
func ChangeJobYAML(q string, rate int64, gen int, size, period time.Duration) (string, error) {
	limited := "true"
	if rate == 0 {
		// As fast as it can, with event times as dense as the generator
		// makes them (one microsecond apart).
		limited, rate = "false", 1_000_000
	}
	r := strconv.FormatInt(rate, 10)
	src, err := NexmarkYAMLPipeline(q, "{isRateLimited: "+limited+", useWallclockEventTime: true, firstEventRate: "+r+", nextEventRate: "+r+"}", size, period)
	if err != nil {
		return "", err
	}
	return src + `
    - type: ExtractWindowingInfo
      name: Stamp
      input: Out
      config:
        fields: {ts: timestamp}
    - type: MapToFields
      name: Tag
      input: Stamp
      config:
        fields: {ts: ts, gen: ` + strconv.Itoa(gen) + `}
    - type: WriteToPubSub
      name: Results
      input: Tag
      config: {topic: ` + changeTopic + `}
`, nil
}

// changeRun is the state of one RunNexmarkChange.
type changeRun struct {
	cfg   ChangeConfig
	req   service.SubmitRequest
	start time.Time
	gen   int
	// broker, svcOpts and sdkQuery are what a Go job's service is opened
	// again with at an update (ChangeConfig.SDK).
	broker   *pubsub.Broker
	svcOpts  service.Options
	sdkQuery nexmark.Query

	svcMu sync.Mutex // guards svc; a leaf
	svc   *service.Service

	mu      sync.Mutex // guards samples, results and outputs
	samples []ThroughputSample
	results []result
	outputs int64
}

// result is one result the harness received.
type result struct {
	at      time.Duration // since the start
	latency time.Duration
	gen     int
}

// RunNexmarkChange runs cfg.Query as a job of an in-process job service
// at cfg.Rate events per second for cfg.Duration and makes cfg.Changes at
// evenly spaced points; it returns the throughput and latency around each.
// With cfg.Rate 0 and no changes it measures the job's maximum rate: the
// outcome's EventsPerSecond.
// It fails when a change fails or when no result arrives after a change
// within changeGrace past the run's end.
func RunNexmarkChange(ctx context.Context, cfg ChangeConfig) (ChangeOutcome, error) {
	cfg.ensureDefaults()
	out := ChangeOutcome{Query: cfg.Query, Rate: cfg.Rate, Workers: cfg.Workers, SampleMillis: cfg.Sample.Milliseconds(),
		WindowSizeSeconds: cfg.WindowSize.Seconds(), WindowPeriodSeconds: cfg.WindowPeriod.Seconds()}
	if cfg.Rate < 0 || cfg.Rate == 0 && len(cfg.Changes) > 0 {
		return out, fmt.Errorf("change bench: the rate must be positive (or 0 without changes), got %g", cfg.Rate)
	}
	for _, c := range cfg.Changes {
		if c != ChangeUpdate && c != ChangeRescale && c != ChangeSnapshot {
			return out, fmt.Errorf("change bench: unknown change %q (want update, rescale or snapshot)", c)
		}
	}
	var pipeline string
	var sdkQuery nexmark.Query
	if cfg.SDK {
		out.Language = "go"
		if err := CheckSDKWindows(cfg.WindowSize, cfg.WindowPeriod); err != nil {
			return out, fmt.Errorf("change bench: %w", err)
		}
		q, err := changeSDKQuery(cfg.Query)
		if err != nil {
			return out, err
		}
		sdkQuery = q
	} else {
		out.Language = "yaml"
		p, err := ChangeJobYAML(cfg.Query, int64(cfg.Rate), 1, cfg.WindowSize, cfg.WindowPeriod)
		if err != nil {
			return out, err
		}
		pipeline = p
	}
	logger := slog.New(discardHandler{})
	b, stopBroker, err := startBenchBroker(ctx, pubsub.Options{StoreDir: filepath.Join(cfg.Dir, "broker"), Logger: logger}, changeTopic)
	if err != nil {
		return out, err
	}
	defer stopBroker()
	r := &changeRun{cfg: cfg, gen: 1, broker: b, sdkQuery: sdkQuery, svcOpts: service.Options{DataDir: filepath.Join(cfg.Dir, "data"), Logger: logger, Broker: b,
		CheckpointInterval: cfg.CheckpointInterval}}
	unsubscribe, err := r.subscribe(b)
	if err != nil {
		return out, err
	}
	defer unsubscribe()
	if cfg.SDK {
		r.svcOpts.Program = changeSDKLoader(sdkQuery, b, int64(cfg.Rate), r.gen, cfg.WindowSize, cfg.WindowPeriod)
	}
	svc, err := service.Open(ctx, r.svcOpts)
	if err != nil {
		return out, err
	}
	r.svc = svc
	defer func() { r.service().Close(context.WithoutCancel(ctx)) }()
	wd, err := os.Getwd()
	if err != nil {
		return out, err
	}
	r.req = service.SubmitRequest{Name: changeJob, Pipeline: pipeline, PipelineFile: "bench-nexmark-change.yaml", BaseDir: wd,
		Options: record.JobOptions{NumWorkers: cfg.Workers, AutoscalingAlgorithm: record.AutoscalingNone}}
	r.start = time.Now()
	if cfg.SDK {
		st, err := svc.StartProgram(ctx, service.ProgramRequest{Name: changeJob, Program: changeProgram, Options: r.req.Options})
		if err != nil {
			return out, fmt.Errorf("starting the Go job: %w", err)
		}
		if st.Job == nil || st.Job.State == record.StateFailed {
			return out, fmt.Errorf("the Go job did not start (%s)", st.Action)
		}
	} else if _, err := svc.Submit(ctx, r.req); err != nil {
		return out, fmt.Errorf("submitting the job: %w", err)
	}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() { defer close(sampled); r.sample(sampleCtx) }()
	defer func() { stopSampling(); <-sampled }()

	n := len(cfg.Changes)
	for i, kind := range cfg.Changes {
		at := cfg.Duration * time.Duration(i+1) / time.Duration(n+1)
		if err := sleepUntil(ctx, r.start.Add(at)); err != nil {
			return out, err
		}
		c, err := r.change(ctx, kind)
		if err != nil {
			return out, fmt.Errorf("change %d (%s): %w", i+1, kind, err)
		}
		out.Changes = append(out.Changes, c)
	}
	if err := sleepUntil(ctx, r.start.Add(cfg.Duration)); err != nil {
		return out, err
	}
	// Go on, up to changeGrace, until every change has seen a result
	// after it: the results flow in whole checkpoints and windows.
	for deadline := time.Now().Add(changeGrace); !r.resultsAfterAll(out.Changes); {
		if time.Now().After(deadline) {
			break
		}
		if err := sleepUntil(ctx, time.Now().Add(cfg.Sample)); err != nil {
			return out, err
		}
	}
	stopSampling()
	<-sampled
	end := time.Since(r.start)
	if p, ok := r.service().ElementsRead(changeJob); ok {
		if m, err := r.service().Metrics(changeJob); err == nil {
			if age := time.Since(p.Started).Seconds(); age > 0 {
				out.SinkWaitShare = m.SinkWaitSeconds / age
			}
		}
	}
	if _, err := r.service().Cancel(ctx, changeJob); err != nil {
		return out, fmt.Errorf("cancelling the job: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.report(&out, end)
	for _, c := range out.Changes {
		if c.FirstResultAfterMillis < 0 {
			return out, fmt.Errorf("no result arrived within %s of the end after the %s at %.1fs", changeGrace, c.Kind, c.AtSeconds)
		}
	}
	return out, nil
}

// sleepUntil waits until t or until ctx is done.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// changeMessage is a result message of ChangeJobYAML's job.
type changeMessage struct {
	TS  json.RawMessage `json:"ts"`
	Gen int             `json:"gen"`
}

// subscribe receives the job's results on the result topic's subject:
// each result's latency is its arrival less its ts.
func (r *changeRun) subscribe(b *pubsub.Broker) (func(), error) {
	subject, err := pubsub.TopicSubject(changeTopic)
	if err != nil {
		return nil, err
	}
	sub, err := b.Conn().Subscribe(subject, func(m *nats.Msg) {
		now := time.Now()
		var msg changeMessage
		if err := json.Unmarshal(m.Data, &msg); err != nil {
			return
		}
		ts, ok := parseResultTime(msg.TS)
		if !ok {
			return
		}
		r.mu.Lock()
		if !r.start.IsZero() {
			r.results = append(r.results, result{at: now.Sub(r.start), latency: now.Sub(ts), gen: msg.Gen})
		}
		r.outputs++
		r.mu.Unlock()
	})
	if err != nil {
		return nil, fmt.Errorf("subscribing to the results: %w", err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, fmt.Errorf("subscribing to the results: %w", err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// parseResultTime reads a result's ts: milliseconds since the epoch, or
// an RFC 3339 time.
func parseResultTime(raw json.RawMessage) (time.Time, bool) {
	var ms int64
	if err := json.Unmarshal(raw, &ms); err == nil {
		return time.UnixMilli(ms), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// sample records, every cfg.Sample until ctx is done, the events the
// job's live execution read and the results that arrived since the last
// sample.
func (r *changeRun) sample(ctx context.Context) {
	t := time.NewTicker(r.cfg.Sample)
	defer t.Stop()
	var last service.Progress
	var lastOutputs int64
	lastAt := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p, ok := r.service().ElementsRead(changeJob)
		at := time.Since(r.start)
		var read int64
		switch {
		case !ok:
		case p.JobID == last.JobID && p.Started.Equal(last.Started):
			read = p.Read - last.Read
		default:
			read = p.Read // a new execution counts from 0
		}
		if ok {
			last = p
		}
		r.mu.Lock()
		outs := r.outputs - lastOutputs
		lastOutputs = r.outputs
		secs := (at - lastAt).Seconds()
		r.samples = append(r.samples, ThroughputSample{AtSeconds: at.Seconds(), EventsPerSecond: float64(read) / secs,
			ResultsPerSecond: float64(outs) / secs})
		r.mu.Unlock()
		lastAt = at
	}
}

// resultsAfterAll reports whether a result of the current pipeline
// arrived after each change.
func (r *changeRun) resultsAfterAll(cs []ChangeResult) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		end := secondsDuration(c.AtSeconds) + time.Duration(c.TookMillis*float64(time.Millisecond))
		if !r.hasResultAfter(end, r.gen) {
			return false
		}
	}
	return true
}

// hasResultAfter reports whether a result tagged gen arrived after t.
func (r *changeRun) hasResultAfter(t time.Duration, gen int) bool {
	for i := len(r.results) - 1; i >= 0 && r.results[i].at > t; i-- {
		if r.results[i].gen == gen {
			return true
		}
	}
	return false
}

func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// service returns the job service that runs the job now.
func (r *changeRun) service() *service.Service {
	r.svcMu.Lock()
	defer r.svcMu.Unlock()
	return r.svc
}

// updateProgram updates the Go job in place as a new build of its
// program does: the running service checks the build's graph against the
// job (CheckRelease) and, when it passes, closes, as the old program's
// process exits; a service opened with the build's loader then replaces
// the job (StartProgram with Update). The build tags its results r.gen.
func (r *changeRun) updateProgram(ctx context.Context, c ChangeResult, begin time.Time) (ChangeResult, error) {
	load := changeSDKLoader(r.sdkQuery, r.broker, int64(r.cfg.Rate), r.gen, r.cfg.WindowSize, r.cfg.WindowPeriod)
	p, err := load(weir.JobInfo{Name: changeJob})
	if err != nil {
		return c, err
	}
	canon, err := p.Graph().Canonical()
	if err != nil {
		return c, err
	}
	old := r.service()
	check, err := old.CheckRelease(service.ReleaseRequest{Name: changeJob, Graph: canon, Program: changeProgram})
	if err != nil {
		return c, fmt.Errorf("the running service refused the new build: %w", err)
	}
	if !check.Report.Compatible {
		return c, fmt.Errorf("the new build is not compatible (%d errors)", len(check.Report.Errors))
	}
	if err := old.Close(ctx); err != nil {
		return c, fmt.Errorf("closing the running service: %w", err)
	}
	opts := r.svcOpts
	opts.Program = load
	svc, err := service.Open(ctx, opts)
	if err != nil {
		return c, fmt.Errorf("opening the service with the new build: %w", err)
	}
	r.svcMu.Lock()
	r.svc = svc
	r.svcMu.Unlock()
	st, err := svc.StartProgram(ctx, service.ProgramRequest{Name: changeJob, Program: changeProgram, Update: true})
	if err != nil {
		return c, fmt.Errorf("the new build's update: %w", err)
	}
	if st.Job == nil {
		return c, fmt.Errorf("the new build's update replaced nothing (%s)", st.Action)
	}
	c.JobID, c.Generation = st.Job.ID, st.Job.Generation
	c.Detail = fmt.Sprintf("job %s generation %d, results tagged gen %d; the program's update: check, service closed, opened with the new build, replaced", st.Job.ID, st.Job.Generation, r.gen)
	c.TookMillis = float64(time.Since(begin).Microseconds()) / 1000
	return c, nil
}

// change makes one change of kind to the running job and says what it
// did.
func (r *changeRun) change(ctx context.Context, kind string) (ChangeResult, error) {
	begin := time.Now()
	c := ChangeResult{Kind: kind, AtSeconds: begin.Sub(r.start).Seconds()}
	switch kind {
	case ChangeUpdate:
		r.gen++
		if r.cfg.SDK {
			return r.updateProgram(ctx, c, begin)
		}
		pipeline, err := ChangeJobYAML(r.cfg.Query, int64(r.cfg.Rate), r.gen, r.cfg.WindowSize, r.cfg.WindowPeriod)
		if err != nil {
			return c, err
		}
		req := r.req
		req.Pipeline = pipeline
		req.Options = record.JobOptions{}
		res, err := r.service().Update(ctx, service.UpdateRequest{SubmitRequest: req})
		if err != nil {
			return c, err
		}
		if res.Job == nil {
			return c, fmt.Errorf("the update replaced nothing (compatible %t, %d errors)", res.Report.Compatible, len(res.Report.Errors))
		}
		c.JobID, c.Generation, c.ServicePauseMillis = res.Job.ID, res.Job.Generation, res.PauseMillis
		c.Detail = fmt.Sprintf("job %s generation %d, results tagged gen %d, service pause %d ms", res.Job.ID, res.Job.Generation, r.gen, res.PauseMillis)
	case ChangeRescale:
		j, err := r.service().Get(changeJob)
		if err != nil {
			return c, err
		}
		from := j.Options.NumWorkers
		to := 2
		if from > 1 {
			to = 1
		}
		if _, err := r.service().UpdateOptions(ctx, changeJob, record.JobOptions{NumWorkers: to}); err != nil {
			return c, err
		}
		if j, err = r.service().Get(changeJob); err != nil {
			return c, err
		}
		if j.Options.NumWorkers != to {
			return c, fmt.Errorf("the job runs %d workers after the rescale from %d to %d", j.Options.NumWorkers, from, to)
		}
		c.JobID, c.Generation, c.WorkersFrom, c.WorkersTo = j.ID, j.Generation, from, to
		c.Detail = fmt.Sprintf("workers %d -> %d", from, to)
	case ChangeSnapshot:
		snap, err := r.service().CreateSnapshot(ctx, service.SnapshotRequest{Job: changeJob})
		if err != nil {
			return c, err
		}
		if snap, err = r.service().WaitSnapshot(ctx, snap.ID); err != nil {
			return c, err
		}
		if snap.State != record.SnapshotReady {
			return c, fmt.Errorf("snapshot %s is %s: %s", snap.ID, snap.State, snap.FailureReason)
		}
		c.JobID, c.Generation, c.SnapshotID = snap.SourceJobID, snap.Generation, snap.ID
		c.Detail = fmt.Sprintf("snapshot %s %s, %d bytes", snap.ID, snap.State, snap.DiskSizeBytes)
	}
	c.TookMillis = float64(time.Since(begin).Microseconds()) / 1000
	return c, nil
}
