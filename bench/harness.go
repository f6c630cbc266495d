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
	"strconv"
	"strings"
	"time"
)

// Measurement is one variant's figures, as printed by `weir bench
// windowed-sum --format json`.
type Measurement struct {
	Name         string  `json:"name"`
	EventsPerSec float64 `json:"events_per_sec"`
	// CPUSeconds is the child's user plus system time over the workload
	// (Outcome.CPUNanos): the binary's start-up, which grows with every
	// package linked into it, is left out. ProcessCPUSeconds is the whole
	// child's; CPUSeconds is that too from a child that does not report
	// its workload's.
	CPUSeconds        float64 `json:"cpu_seconds"`
	ProcessCPUSeconds float64 `json:"process_cpu_seconds"`
	// RatioToBaseline is EventsPerSec over the baseline's (0 when the
	// baseline did not run).
	RatioToBaseline float64 `json:"ratio_to_baseline"`
	// PeakRSSBytes is the child process's peak resident set size.
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// MinorFaults is the number of pages the run touched for the first
	// time (Outcome.MinorFaults; 0 where not reported).
	MinorFaults int64 `json:"minor_faults"`

	// The Warm figures are those of the variant's second run in the same
	// child (Outcome.Warm), whose heap and caches are warm as a
	// long-running server's are; all 0 when the child ran once.
	WarmEventsPerSec    float64 `json:"warm_events_per_sec"`
	WarmCPUSeconds      float64 `json:"warm_cpu_seconds"`
	WarmRatioToBaseline float64 `json:"warm_ratio_to_baseline"`
	WarmMinorFaults     int64   `json:"warm_minor_faults"`

	// Outcome is what the child reported.
	Outcome Outcome `json:"-"`
	// Wall is the child process's wall time, start-up included.
	Wall time.Duration `json:"-"`
}

// EventsPerCPUSecond returns events over the child's CPU seconds.
func (m Measurement) EventsPerCPUSecond() float64 {
	if m.CPUSeconds <= 0 {
		return 0
	}
	return float64(m.Outcome.Events) / m.CPUSeconds
}

// WarmEventsPerCPUSecond returns events over the warm run's CPU seconds
// (0 without a warm run).
func (m Measurement) WarmEventsPerCPUSecond() float64 { return m.warmRun().EventsPerCPUSecond() }

// warmRun returns m with its warm run's figures in the first run's places
// (all 0 without a warm run).
func (m Measurement) warmRun() Measurement {
	m.EventsPerSec, m.CPUSeconds, m.RatioToBaseline = m.WarmEventsPerSec, m.WarmCPUSeconds, m.WarmRatioToBaseline
	return m
}

// Harness runs variants in child processes and measures them.
type Harness struct {
	// Command returns the command that runs variant v of cfg in a child
	// process. The child must call RunChild (it prints its Outcome as JSON
	// on stdout) and exit 0. Required.
	Command func(ctx context.Context, v Variant, cfg Config) *exec.Cmd
	// Stderr receives the children's stderr. Default os.Stderr.
	Stderr io.Writer
	// Logger receives progress. Default slog.Default().
	Logger *slog.Logger
}

// Run runs each variant in turn, each in its own child process, checks
// that every variant computed the generated total and the same results as
// the others, and returns the measurements in the order of variants.
// A wrong result is an error wrapping ErrMismatch.
func (h Harness) Run(ctx context.Context, cfg Config, variants []Variant) ([]Measurement, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h.Command == nil {
		return nil, errors.New("bench harness: no child command")
	}
	logger := h.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if l, ok := LoadAverage(); ok && l >= float64(runtime.NumCPU()) {
		logger.Warn("the machine is busy: other processes compete for the CPUs, so throughput figures will be low and noisy",
			"load_average", l, "cpus", runtime.NumCPU())
	}
	want := ExpectedTotal(cfg)
	ms := make([]Measurement, 0, len(variants))
	for _, v := range variants {
		logger.Info("running benchmark variant", "variant", v.String(), "events", cfg.Events, "keys", cfg.Keys)
		m, err := h.runChild(ctx, v, cfg)
		if err != nil {
			return nil, err
		}
		if err := m.Outcome.Check(cfg, want); err != nil {
			return nil, err
		}
		if len(ms) > 0 {
			ref := ms[0].Outcome
			if m.Outcome.Results != ref.Results || m.Outcome.Checksum != ref.Checksum {
				return nil, fmt.Errorf("%w: %s emitted %d results (checksum %x), %s emitted %d (checksum %x)",
					ErrMismatch, m.Name, m.Outcome.Results, m.Outcome.Checksum, ms[0].Name, ref.Results, ref.Checksum)
			}
		}
		logger.Info("benchmark variant done", "variant", m.Name, "events_per_sec", int64(m.EventsPerSec),
			"cpu_seconds", m.CPUSeconds, "peak_rss_bytes", m.PeakRSSBytes)
		ms = append(ms, m)
	}
	SetRatios(ms)
	return ms, nil
}

// SetRatios fills RatioToBaseline from the measurement named "baseline".
func SetRatios(ms []Measurement) {
	var base, warmBase float64
	for _, m := range ms {
		if m.Name == string(KindBaseline) {
			base, warmBase = m.EventsPerSec, m.WarmEventsPerSec
		}
	}
	for i := range ms {
		if base > 0 {
			ms[i].RatioToBaseline = ms[i].EventsPerSec / base
		}
		if warmBase > 0 && ms[i].WarmEventsPerSec > 0 {
			ms[i].WarmRatioToBaseline = ms[i].WarmEventsPerSec / warmBase
		}
	}
}

func (h Harness) runChild(ctx context.Context, v Variant, cfg Config) (Measurement, error) {
	cmd := h.Command(ctx, v, cfg)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = h.Stderr
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return Measurement{}, fmt.Errorf("benchmark variant %s: child process: %w", v, err)
	}
	wall := time.Since(start)
	var o Outcome
	if err := json.Unmarshal(lastLine(stdout.Bytes()), &o); err != nil {
		return Measurement{}, fmt.Errorf("benchmark variant %s: reading the child's outcome %q: %w", v, stdout.String(), err)
	}
	if o.Variant != v.String() {
		return Measurement{}, fmt.Errorf("benchmark variant %s: the child ran %q", v, o.Variant)
	}
	st := cmd.ProcessState
	m := Measurement{
		Name:              v.String(),
		CPUSeconds:        (st.UserTime() + st.SystemTime()).Seconds(),
		ProcessCPUSeconds: (st.UserTime() + st.SystemTime()).Seconds(),
		PeakRSSBytes:      peakRSS(st),
		Outcome:           o,
		Wall:              wall,
	}
	if o.CPUNanos > 0 {
		m.CPUSeconds = time.Duration(o.CPUNanos).Seconds()
	}
	if o.ElapsedNanos > 0 {
		m.EventsPerSec = float64(o.Events) / o.Elapsed().Seconds()
	}
	m.MinorFaults = o.MinorFaults
	if w := o.Warm; w != nil && w.ElapsedNanos > 0 {
		m.WarmEventsPerSec = float64(o.Events) / time.Duration(w.ElapsedNanos).Seconds()
		m.WarmCPUSeconds = time.Duration(w.CPUNanos).Seconds()
		m.WarmMinorFaults = w.MinorFaults
	}
	return m, nil
}

func lastLine(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

// RunChild is the body of a benchmark child process: it runs variant v of
// cfg in this process — twice when warm, see RunWarm — and writes its
// Outcome as one line of JSON to w.
func RunChild(ctx context.Context, v Variant, cfg Config, warm bool, w io.Writer, logger *slog.Logger) error {
	run := Run
	if warm {
		run = RunWarm
	}
	o, err := run(ctx, v, cfg, logger)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(w).Encode(o); err != nil {
		return fmt.Errorf("writing the outcome: %w", err)
	}
	return nil
}

// Target is a performance goal for one variant.
type Target struct {
	// Variant is the measurement the goal applies to.
	Variant string
	// Description states the goal.
	Description string
	// Want is the goal's threshold; Got is measured, in the same unit.
	Want, Got float64
	// Met says whether Got reaches Want.
	Met bool
}

// Targets evaluates the windowed-sum goals against ms: sdk-w1 at least
// half of the loop baseline's throughput, sdk-w2 at least 1.5× sdk-w1,
// yaml-w1 at least 5,000,000 events per CPU-second — each for the first
// (cold) run and, when measured, for the warm one. Goals whose variants
// did not run are left out.
func Targets(ms []Measurement) []Target {
	by := map[string]Measurement{}
	for _, m := range ms {
		by[m.Name] = m
	}
	var ts []Target
	add := func(variant, desc string, want, got float64) {
		if got > 0 {
			ts = append(ts, Target{Variant: variant, Description: desc, Want: want, Got: got, Met: got >= want})
		}
	}
	if w1, ok := by["sdk-w1"]; ok {
		add("sdk-w1", "events/s ≥ 50% of baseline (ratio)", 0.5, w1.RatioToBaseline)
		add("sdk-w1", "warm: events/s ≥ 50% of baseline (ratio)", 0.5, w1.WarmRatioToBaseline)
		if w2, ok := by["sdk-w2"]; ok && w1.EventsPerSec > 0 {
			add("sdk-w2", "events/s ≥ 1.5× sdk-w1 (ratio)", 1.5, w2.EventsPerSec/w1.EventsPerSec)
			if w1.WarmEventsPerSec > 0 {
				add("sdk-w2", "warm: events/s ≥ 1.5× sdk-w1 (ratio)", 1.5, w2.WarmEventsPerSec/w1.WarmEventsPerSec)
			}
		}
	}
	if y, ok := by["yaml-w1"]; ok {
		add("yaml-w1", "events per CPU-second ≥ 5,000,000", 5e6, y.EventsPerCPUSecond())
		add("yaml-w1", "warm: events per CPU-second ≥ 5,000,000", 5e6, y.WarmEventsPerCPUSecond())
	}
	return ts
}

// LoadAverage returns the one-minute load average of the machine, when the
// platform exposes it (/proc/loadavg). Figures measured while it exceeds
// the number of CPUs are unreliable: other processes take the cores.
func LoadAverage() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	l, err := strconv.ParseFloat(f[0], 64)
	return l, err == nil
}
