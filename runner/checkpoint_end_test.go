package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/weir-dev/weir/runner"
)

// TestCheckpointWhileEnding takes checkpoints back to back while short
// executions end, as a supervisor's periodic checkpoints do when a bounded
// job reaches the end of its input. Every checkpoint completes: the last
// participant's final report may name the epoch before the one a
// checkpoint just began, and it must still complete that checkpoint.
// Before, such a checkpoint never completed and Checkpoint waited forever
// once the execution had ended (a job stuck RUNNING at its end, with
// nothing logged).
func TestCheckpointWhileEnding(t *testing.T) {
	for round := range 300 {
		src := &seqSource{n: 50, splits: 2}
		x, err := runner.Start(context.Background(), buildCheckpointed(src, newTxSink()).Program(), runner.Options{NumWorkers: 2, Checkpoints: true})
		if err != nil {
			t.Fatal(err)
		}
		for ended := false; !ended; {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := x.Checkpoint(ctx)
			cancel()
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			select {
			case <-x.Done():
				ended = true
			default:
			}
		}
		if _, err := x.Wait(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}
