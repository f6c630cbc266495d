package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/weir-dev/weir/diff"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/sandbox"
)

// runRehearsal is pubsub-to-sql's rehearse variant: what weir rehearse
// JOB NEW.yaml --since does for the pipeline variant's pipeline over the
// pre-published topic, in this process, timed from the first read of the
// topic to the comparison's verdict.
func runRehearsal(ctx context.Context, b *pubsub.Broker, cfg PubSubConfig, dir string, logger *slog.Logger) (PubSubOutcome, error) {
	work, err := os.MkdirTemp(dir, "rehearse-")
	if err != nil {
		return PubSubOutcome{}, fmt.Errorf("creating a work directory: %w", err)
	}
	defer os.RemoveAll(work)
	src := []byte(SumPipelineYAML("unused", cfg.Window, work+"/sums.sqlite"))
	opts := sandbox.Options{BaseDir: work, TempDir: work, Workers: cfg.Workers, Logger: logger}
	start, cpu0 := time.Now(), processCPU()
	oldP, err := sandbox.Load("old.yaml", src, opts)
	if err != nil {
		return PubSubOutcome{}, err
	}
	// Read the recorded stretch once, by stream sequence, into the trace a
	// page at a time, as the server does (sandbox.Trace.AppendRetained).
	trace := &sandbox.Trace{SpillDir: work}
	defer trace.Close()
	mt, err := sandbox.NewMessagesTracer(trace, oldP, sourceStepPS)
	if err != nil {
		return PubSubOutcome{}, err
	}
	if err := mt.AddRetained(ctx, b, pubsubTopic, time.Time{}); err != nil {
		return PubSubOutcome{}, err
	}
	logger.Info("rehearse: read the topic", "messages", trace.Elements(), "spilled_bytes", trace.Spilled(), "seconds", time.Since(start).Seconds())
	var results []*sandbox.Result
	defer func() {
		for _, r := range results {
			r.Close()
		}
	}()
	// As weir rehearse does: the three runs at once, over the one trace.
	spec := sandbox.RunSpec{Path: "pipeline.yaml", Src: src, Opts: opts}
	if results, err = sandbox.RunAll(ctx, trace, spec, spec, spec); err != nil {
		return PubSubOutcome{}, fmt.Errorf("a sandboxed run: %w", err)
	}
	logger.Info("rehearse: runs done", "seconds", time.Since(start).Seconds())
	sides := make([]diff.Side, 3)
	for i, r := range results {
		if sides[i], err = r.Side(); err != nil {
			return PubSubOutcome{}, err
		}
	}
	rep, err := diff.Run(sides[0], sides[1], sides[2], diff.Options{MaxDetails: -1})
	if err != nil {
		return PubSubOutcome{}, fmt.Errorf("comparing the outputs: %w", err)
	}
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	o := PubSubOutcome{Variant: string(VariantRehearse), Messages: results[0].Input, ElapsedNanos: elapsed.Nanoseconds(), CPUNanos: cpu.Nanoseconds(),
		Rows: results[2].Rows.Len(), Differences: rep.Total + rep.TotalNoise}
	for _, out := range rep.Outputs {
		o.RowsCompared += out.RowsCompared
	}
	return o, nil
}
