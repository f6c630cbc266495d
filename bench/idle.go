package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/service"
	"github.com/weir-dev/weir/service/record"
)

// IdleConfig configures `weir bench idle`: a job service with an
// embedded broker holding Jobs streaming jobs that read a topic nobody
// publishes to (a windowed Combine into SQLite each, checkpoints at the
// default interval), measured while they wait.
type IdleConfig struct {
	// Jobs is the number of idle jobs. Default 100.
	Jobs int
	// Duration is how long the process's CPU time is measured once every
	// job runs. Default 20s.
	Duration time.Duration
	// Dir holds the service's data directory and the jobs' databases.
	Dir string
	// CheckpointInterval is the service's; 0: its default.
	CheckpointInterval time.Duration
	// Profile, when set, receives a CPU profile of the measured stretch.
	Profile io.Writer
}

// IdleResult is what one run measured.
type IdleResult struct {
	Jobs int
	// CPU is the process's CPU time over Wall, with every job running.
	CPU, Wall time.Duration
	// Checkpoints is how many checkpoints the jobs took meanwhile.
	Checkpoints int64
	// Goroutines and HeapBytes are read at the end.
	Goroutines int
	HeapBytes  uint64
}

// CoreShare is the share of one core the process used (1 = a whole core).
func (r IdleResult) CoreShare() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.CPU) / float64(r.Wall)
}

// PerJob is the share of one core each idle job costs, over the share the
// same process costs with no job (base).
func (r IdleResult) PerJob(base IdleResult) float64 {
	if r.Jobs == 0 {
		return 0
	}
	return (r.CoreShare() - base.CoreShare()) / float64(r.Jobs)
}

// IdlePipelineYAML is the idle job: a Pub/Sub topic read through the
// job's own subscription, summed per region in one-minute windows,
// upserted into SQLite.
const IdlePipelineYAML = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Read
      config: {topic: idle, format: json, schema: {region: string, amount: int}}
    - type: Combine
      name: Totals
      input: Read
      windowing: {type: fixed, size: 1m}
      config:
        group_by: region
        combine: {total: {value: amount, fn: sum}}
    - type: WriteToSql
      name: Write
      input: Totals
      config: {dsn: out.db, table: totals, key: [region]}
`

// RunIdle runs one idle measurement.
func RunIdle(ctx context.Context, cfg IdleConfig) (IdleResult, error) {
	if cfg.Jobs < 0 {
		return IdleResult{}, fmt.Errorf("idle benchmark: --jobs %d is negative", cfg.Jobs)
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 20 * time.Second
	}
	if cfg.Dir == "" {
		return IdleResult{}, fmt.Errorf("idle benchmark: no directory")
	}
	logger := slog.New(discardHandler{})
	b, stopBroker, err := startBenchBroker(ctx, pubsub.Options{StoreDir: filepath.Join(cfg.Dir, "broker"), Logger: logger}, "idle")
	if err != nil {
		return IdleResult{}, err
	}
	defer stopBroker()
	svc, err := service.Open(ctx, service.Options{DataDir: filepath.Join(cfg.Dir, "data"), Logger: logger, Broker: b,
		CheckpointInterval: cfg.CheckpointInterval})
	if err != nil {
		return IdleResult{}, err
	}
	defer func() { svc.Close(context.WithoutCancel(ctx)) }()
	for i := range cfg.Jobs {
		dir := filepath.Join(cfg.Dir, fmt.Sprintf("job-%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return IdleResult{}, err
		}
		if _, err := svc.Submit(ctx, service.SubmitRequest{Name: fmt.Sprintf("idle-%d", i), Pipeline: IdlePipelineYAML,
			PipelineFile: "idle.yaml", BaseDir: dir, Options: record.JobOptions{NumWorkers: 1}}); err != nil {
			return IdleResult{}, fmt.Errorf("submitting idle job %d: %w", i, err)
		}
	}
	// Every job past its first checkpoints before the measurement.
	settle := time.NewTimer(3 * time.Second)
	select {
	case <-ctx.Done():
		settle.Stop()
		return IdleResult{}, ctx.Err()
	case <-settle.C:
	}
	checkpoints := func() int64 {
		var n int64
		jobs, err := svc.List(service.StatusActive)
		if err != nil {
			return 0
		}
		for _, j := range jobs {
			if !strings.HasPrefix(j.Name, "idle-") || j.State != record.StateRunning {
				continue
			}
			if j.LastCheckpoint != nil {
				n += int64(j.LastCheckpoint.Epoch)
			}
		}
		return n
	}
	if cfg.Profile != nil {
		if err := pprof.StartCPUProfile(cfg.Profile); err != nil {
			return IdleResult{}, err
		}
		defer pprof.StopCPUProfile()
	}
	cp0, cpu0, t0 := checkpoints(), processCPU(), time.Now()
	wait := time.NewTimer(cfg.Duration)
	select {
	case <-ctx.Done():
		wait.Stop()
		return IdleResult{}, ctx.Err()
	case <-wait.C:
	}
	res := IdleResult{Jobs: cfg.Jobs, CPU: processCPU() - cpu0, Wall: time.Since(t0), Checkpoints: checkpoints() - cp0,
		Goroutines: runtime.NumGoroutine()}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.HeapBytes = ms.HeapAlloc
	return res, nil
}
