package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"time"
)

// PubSubHarness runs the pubsub-to-sql variants, each in its own child
// process, and summarises them.
type PubSubHarness struct {
	// Command returns the command that runs variant v (run number run) of
	// cfg in a child process with the shared directory dir. The child must
	// call RunPubSubChild and exit 0. Required.
	Command func(ctx context.Context, v PubSubVariant, run int, cfg PubSubConfig, dir string) *exec.Cmd
	// TempDir is where the shared directory (the broker store, about
	// 150 bytes per message) is created. Default os.TempDir().
	TempDir string
	// Stderr receives the children's stderr. Default os.Stderr.
	Stderr io.Writer
	// Logger receives progress. Default slog.Default().
	Logger *slog.Logger
}

// PubSubMeasurement is one child's figures.
type PubSubMeasurement struct {
	Name     string `json:"name"`
	Run      int    `json:"run"`
	Messages int64  `json:"messages"`
	// MessagesPerSec is Messages over the timed region (see
	// PubSubOutcome.ElapsedNanos).
	MessagesPerSec float64 `json:"messages_per_sec"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// CPUSeconds is the child's CPU time over the timed region, the
	// embedded broker's included; ProcessCPUSeconds is the whole child's
	// (start-up, broker recovery and verification included).
	CPUSeconds        float64 `json:"cpu_seconds"`
	ProcessCPUSeconds float64 `json:"process_cpu_seconds"`
	// PeakRSSBytes is the child's peak resident set size, the embedded
	// broker's included.
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// Checkpoint figures (pipeline variants): count, mean and longest
	// duration of Checkpoint + state write + Commit, and the mean of the
	// Checkpoint (barrier) part alone.
	Checkpoints      int     `json:"checkpoints,omitempty"`
	CheckpointMeanMs float64 `json:"checkpoint_mean_ms,omitempty"`
	CheckpointMaxMs  float64 `json:"checkpoint_max_ms,omitempty"`
	BarrierMeanMs    float64 `json:"barrier_mean_ms,omitempty"`
	// Latency from publish to committed row (latency variant).
	LatencyP50Ms float64 `json:"latency_p50_ms,omitempty"`
	LatencyP99Ms float64 `json:"latency_p99_ms,omitempty"`
	LatencyMaxMs float64 `json:"latency_max_ms,omitempty"`
	// PublishRate is the latency variant's achieved publish rate.
	PublishRate float64 `json:"publish_rate,omitempty"`

	Outcome PubSubOutcome `json:"-"`
}

// MessagesPerCPUSecond returns messages over the timed region's CPU time.
func (m PubSubMeasurement) MessagesPerCPUSecond() float64 {
	if m.CPUSeconds <= 0 {
		return 0
	}
	return float64(m.Messages) / m.CPUSeconds
}

// PubSubSummary holds the medians over the runs.
type PubSubSummary struct {
	RawMessagesPerSec      float64 `json:"raw_messages_per_sec,omitempty"`
	PipelineMessagesPerSec float64 `json:"pipeline_messages_per_sec,omitempty"`
	// PipelineToRaw is the median over runs of pipeline / raw throughput.
	PipelineToRaw                 float64 `json:"pipeline_to_raw,omitempty"`
	PipelineFinalCPMessagesPerSec float64 `json:"pipeline_final_cp_messages_per_sec,omitempty"`
	// CheckpointedToFinalOnly is the median over runs of the throughput
	// with a checkpoint every interval over the throughput with only the
	// final checkpoint: 1 means checkpoints cost nothing.
	CheckpointedToFinalOnly float64 `json:"checkpointed_to_final_only,omitempty"`
	CheckpointMeanMs        float64 `json:"checkpoint_mean_ms,omitempty"`
	CheckpointMaxMs         float64 `json:"checkpoint_max_ms,omitempty"`
	RawPeakRSSBytes         int64   `json:"raw_peak_rss_bytes,omitempty"`
	PipelinePeakRSSBytes    int64   `json:"pipeline_peak_rss_bytes,omitempty"`
	LatencyP50Ms            float64 `json:"latency_p50_ms,omitempty"`
	LatencyP99Ms            float64 `json:"latency_p99_ms,omitempty"`
	LatencyMaxMs            float64 `json:"latency_max_ms,omitempty"`
	// RehearseSeconds is the rehearsal's median wall time (read the
	// messages, old twice, new once, compare); RehearseToPipeline the
	// median over runs of that time over the pipeline variant's time to
	// consume the same messages once (issue target: at most 3).
	RehearseSeconds    float64 `json:"rehearse_seconds,omitempty"`
	RehearseToPipeline float64 `json:"rehearse_to_pipeline,omitempty"`
}

// PubSubReport is the result of `weir bench pubsub-to-sql`.
type PubSubReport struct {
	Messages                  int64   `json:"messages"`
	MessageBytes              int     `json:"message_bytes"`
	Keys                      int64   `json:"keys"`
	WindowSeconds             float64 `json:"window_seconds"`
	Workers                   int     `json:"workers"`
	CheckpointIntervalSeconds float64 `json:"checkpoint_interval_seconds"`
	LatencyRate               int     `json:"latency_rate"`
	LatencyDurationSeconds    float64 `json:"latency_duration_seconds"`
	Runs                      int     `json:"runs"`
	// WindowSums is how many (window, key) rows the table must hold, and
	// Total their sum: the verified ground truth.
	WindowSums int64 `json:"window_sums"`
	Total      int64 `json:"total"`
	// LoadAverage is the one-minute load average before and after the runs.
	LoadAverage    float64 `json:"load_average"`
	LoadAverageEnd float64 `json:"load_average_end"`
	CPUs           int     `json:"cpus"`
	// Publish is the pre-publishing child (absent when only latency ran).
	Publish      *PubSubMeasurement  `json:"publish,omitempty"`
	Measurements []PubSubMeasurement `json:"measurements"`
	Summary      PubSubSummary       `json:"summary"`
	Targets      []PubSubTarget      `json:"targets"`
}

// Run runs the publish child once (when a variant consumes the
// pre-published messages), then every variant in turn, runs times, and
// verifies every child's result. A wrong result is an error wrapping
// ErrMismatch.
func (h PubSubHarness) Run(ctx context.Context, cfg PubSubConfig, variants []PubSubVariant, runs int) (*PubSubReport, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h.Command == nil {
		return nil, errors.New("bench harness: no child command")
	}
	if runs < 1 {
		return nil, fmt.Errorf("runs must be at least 1, got %d", runs)
	}
	logger := h.Logger
	if logger == nil {
		logger = slog.Default()
	}
	rep := &PubSubReport{
		Messages: cfg.Messages, MessageBytes: MessageSize, Keys: cfg.Keys, WindowSeconds: cfg.Window.Seconds(),
		Workers: cfg.Workers, CheckpointIntervalSeconds: cfg.CheckpointInterval.Seconds(),
		LatencyRate: cfg.LatencyRate, LatencyDurationSeconds: cfg.LatencyDuration.Seconds(), Runs: runs,
		CPUs: runtime.NumCPU(), Measurements: []PubSubMeasurement{},
	}
	if l, ok := LoadAverage(); ok {
		rep.LoadAverage = l
		if l >= float64(runtime.NumCPU()) {
			logger.Warn("the machine is busy: other processes compete for the CPUs, so throughput figures will be low and noisy",
				"load_average", l, "cpus", runtime.NumCPU())
		}
	}
	dir, err := os.MkdirTemp(h.TempDir, "weir-bench-pubsub-")
	if err != nil {
		return nil, fmt.Errorf("creating the benchmark directory: %w", err)
	}
	defer os.RemoveAll(dir)

	var want ExpectedSums
	if slices.ContainsFunc(variants, PubSubVariant.needsPublished) {
		want = ComputeExpectedSums(cfg)
		rep.WindowSums, rep.Total = want.Rows, want.Total
		logger.Info("publishing the benchmark messages", "messages", cfg.Messages, "keys", cfg.Keys)
		m, err := h.runChild(ctx, VariantPublish, 0, cfg, dir)
		if err != nil {
			return nil, err
		}
		if m.Messages != cfg.Messages {
			return nil, fmt.Errorf("%w: published %d messages, want %d", ErrMismatch, m.Messages, cfg.Messages)
		}
		logger.Info("published", "messages_per_sec", int64(m.MessagesPerSec), "seconds", m.ElapsedSeconds)
		rep.Publish = &m
	}
	for run := 1; run <= runs; run++ {
		for _, v := range variants {
			logger.Info("running benchmark variant", "variant", string(v), "run", run, "messages", cfg.Messages)
			m, err := h.runChild(ctx, v, run, cfg, dir)
			if err != nil {
				return nil, err
			}
			if err := checkPubSub(m, cfg, want); err != nil {
				return nil, err
			}
			logger.Info("benchmark variant done", "variant", m.Name, "run", run, "messages_per_sec", int64(m.MessagesPerSec),
				"cpu_seconds", m.CPUSeconds, "peak_rss_bytes", m.PeakRSSBytes)
			rep.Measurements = append(rep.Measurements, m)
		}
	}
	if l, ok := LoadAverage(); ok {
		rep.LoadAverageEnd = l
	}
	rep.Summary = summarise(rep.Measurements)
	rep.Targets = PubSubTargets(rep.Summary)
	return rep, nil
}

// checkPubSub re-checks, in the parent, what a child reported.
func checkPubSub(m PubSubMeasurement, cfg PubSubConfig, want ExpectedSums) error {
	o := m.Outcome
	switch PubSubVariant(m.Name) {
	case VariantRaw:
		if o.Messages != cfg.Messages {
			return fmt.Errorf("%w: raw consumed %d messages, want %d", ErrMismatch, o.Messages, cfg.Messages)
		}
	case VariantPipeline, VariantPipelineFinalCP:
		if o.Messages != cfg.Messages || o.Rows != want.Rows || o.Total != want.Total || o.Count != want.Count || o.Checksum != want.Checksum {
			return fmt.Errorf("%w: %s read %d messages and its table holds %d window sums adding up to %d over %d messages (checksum %x); "+
				"want %d messages, %d sums adding up to %d (checksum %x)", ErrMismatch, m.Name, o.Messages, o.Rows, o.Total, o.Count,
				o.Checksum, cfg.Messages, want.Rows, want.Total, want.Checksum)
		}
	case VariantRehearse:
		if o.Messages != cfg.Messages || o.Rows != want.Rows || o.Differences != 0 {
			return fmt.Errorf("%w: the rehearsal read %d messages, its runs wrote %d window sums and found %d differences; want %d messages, %d sums and none",
				ErrMismatch, o.Messages, o.Rows, o.Differences, cfg.Messages, want.Rows)
		}
	case VariantLatency:
		if o.Samples != o.Messages || o.Rows != o.Messages || o.Messages == 0 {
			return fmt.Errorf("%w: latency published %d probes, the table holds %d, %d were timed", ErrMismatch, o.Messages, o.Rows, o.Samples)
		}
	}
	return nil
}

func (h PubSubHarness) runChild(ctx context.Context, v PubSubVariant, run int, cfg PubSubConfig, dir string) (PubSubMeasurement, error) {
	cmd := h.Command(ctx, v, run, cfg, dir)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = h.Stderr
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Run(); err != nil {
		return PubSubMeasurement{}, fmt.Errorf("benchmark variant %s (run %d): child process: %w", v, run, err)
	}
	var o PubSubOutcome
	if err := json.Unmarshal(lastLine(stdout.Bytes()), &o); err != nil {
		return PubSubMeasurement{}, fmt.Errorf("benchmark variant %s: reading the child's outcome %q: %w", v, stdout.String(), err)
	}
	if o.Variant != string(v) || o.Run != run {
		return PubSubMeasurement{}, fmt.Errorf("benchmark variant %s run %d: the child ran %q run %d", v, run, o.Variant, o.Run)
	}
	st := cmd.ProcessState
	m := PubSubMeasurement{
		Name:              string(v),
		Run:               run,
		Messages:          o.Messages,
		ElapsedSeconds:    o.Elapsed().Seconds(),
		CPUSeconds:        time.Duration(o.CPUNanos).Seconds(),
		ProcessCPUSeconds: (st.UserTime() + st.SystemTime()).Seconds(),
		PeakRSSBytes:      peakRSS(st),
		Checkpoints:       o.Checkpoints,
		Outcome:           o,
	}
	if o.ElapsedNanos > 0 {
		m.MessagesPerSec = float64(o.Messages) / o.Elapsed().Seconds()
	}
	if o.Checkpoints > 0 {
		m.CheckpointMeanMs = ms(time.Duration(o.CheckpointNanos / int64(o.Checkpoints)))
		m.BarrierMeanMs = ms(time.Duration(o.BarrierNanos / int64(o.Checkpoints)))
		m.CheckpointMaxMs = ms(time.Duration(o.CheckpointMaxNanos))
	}
	if o.Samples > 0 {
		m.LatencyP50Ms = ms(time.Duration(o.LatencyP50Nanos))
		m.LatencyP99Ms = ms(time.Duration(o.LatencyP99Nanos))
		m.LatencyMaxMs = ms(time.Duration(o.LatencyMaxNanos))
		m.MessagesPerSec = 0 // paced: the rate is the configuration's
		if o.PublishNanos > 0 {
			m.PublishRate = float64(o.Messages) / time.Duration(o.PublishNanos).Seconds()
		}
	}
	return m, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// summarise computes the medians over runs; ratios are taken within each
// run (the same machine conditions) and then their median.
func summarise(ms []PubSubMeasurement) PubSubSummary {
	by := map[PubSubVariant]map[int]PubSubMeasurement{}
	for _, m := range ms {
		v := PubSubVariant(m.Name)
		if by[v] == nil {
			by[v] = map[int]PubSubMeasurement{}
		}
		by[v][m.Run] = m
	}
	col := func(v PubSubVariant, f func(PubSubMeasurement) float64) float64 {
		var xs []float64
		for _, m := range by[v] {
			xs = append(xs, f(m))
		}
		return median(xs)
	}
	ratio := func(a, b PubSubVariant) float64 {
		var xs []float64
		for run, ma := range by[a] {
			if mb, ok := by[b][run]; ok && mb.MessagesPerSec > 0 {
				xs = append(xs, ma.MessagesPerSec/mb.MessagesPerSec)
			}
		}
		return median(xs)
	}
	rate := func(m PubSubMeasurement) float64 { return m.MessagesPerSec }
	rss := func(m PubSubMeasurement) float64 { return float64(m.PeakRSSBytes) }
	return PubSubSummary{
		RawMessagesPerSec:             col(VariantRaw, rate),
		PipelineMessagesPerSec:        col(VariantPipeline, rate),
		PipelineToRaw:                 ratio(VariantPipeline, VariantRaw),
		PipelineFinalCPMessagesPerSec: col(VariantPipelineFinalCP, rate),
		CheckpointedToFinalOnly:       ratio(VariantPipeline, VariantPipelineFinalCP),
		CheckpointMeanMs:              col(VariantPipeline, func(m PubSubMeasurement) float64 { return m.CheckpointMeanMs }),
		CheckpointMaxMs:               col(VariantPipeline, func(m PubSubMeasurement) float64 { return m.CheckpointMaxMs }),
		RawPeakRSSBytes:               int64(col(VariantRaw, rss)),
		PipelinePeakRSSBytes:          int64(col(VariantPipeline, rss)),
		LatencyP50Ms:                  col(VariantLatency, func(m PubSubMeasurement) float64 { return m.LatencyP50Ms }),
		LatencyP99Ms:                  col(VariantLatency, func(m PubSubMeasurement) float64 { return m.LatencyP99Ms }),
		LatencyMaxMs:                  col(VariantLatency, func(m PubSubMeasurement) float64 { return m.LatencyMaxMs }),
		RehearseSeconds:               col(VariantRehearse, func(m PubSubMeasurement) float64 { return m.ElapsedSeconds }),
		RehearseToPipeline: func() float64 {
			var xs []float64
			for run, r := range by[VariantRehearse] {
				if p, ok := by[VariantPipeline][run]; ok && p.ElapsedSeconds > 0 {
					xs = append(xs, r.ElapsedSeconds/p.ElapsedSeconds)
				}
			}
			return median(xs)
		}(),
	}
}

// PubSubTargets evaluates the goal of issue 3: the pipeline sustains at
// least 50% of the raw consume rate. It is left out when either did not run.
func PubSubTargets(s PubSubSummary) []PubSubTarget {
	if s.PipelineToRaw <= 0 {
		return nil
	}
	return []PubSubTarget{{Variant: string(VariantPipeline), Description: "messages/s ≥ 50% of raw consume (ratio)",
		Want: 0.5, Got: s.PipelineToRaw, Met: s.PipelineToRaw >= 0.5}}
}

// PubSubTarget is a goal of pubsub-to-sql: Got (measured) against Want,
// in the same unit.
type PubSubTarget struct {
	Variant     string  `json:"variant"`
	Description string  `json:"description"`
	Want        float64 `json:"want"`
	Got         float64 `json:"got"`
	Met         bool    `json:"met"`
}
