package bench

import (
	"context"
	"testing"
	"time"
)

// TestRunStateSane runs the state benchmark at a small key count for each
// job and checks that its figures describe the state it built: every key
// held, a plausible heap per key, a checkpoint that wrote every key and a
// 1%-changed checkpoint that wrote only the changed keys.
func TestRunStateSane(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two streaming jobs of 20,000 keys")
	}
	const keys = 20000
	for _, job := range []string{"sdk", "yaml", "stateful"} {
		t.Run(job, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out, err := RunState(ctx, StateConfig{Job: job, Keys: keys, Dir: t.TempDir()})
			if err != nil {
				t.Fatalf("RunState: %v", err)
			}
			t.Logf("%+v", out)
			if out.KeysHeld != keys {
				t.Errorf("keys held = %d, want %d", out.KeysHeld, keys)
			}
			if out.HeapBytesPerKey <= 0 || out.HeapBytesPerKey >= 1<<20 {
				t.Errorf("heap bytes per key = %.1f, want in (0, 1 MiB)", out.HeapBytesPerKey)
			}
			if out.CheckpointBytesPerKey <= 0 {
				t.Errorf("checkpoint bytes per key = %.1f, want > 0", out.CheckpointBytesPerKey)
			}
			if out.CheckpointEntries < keys {
				t.Errorf("the full checkpoint wrote %d entries, want at least one per key (%d)", out.CheckpointEntries, keys)
			}
			if out.ChangedKeys != keys/100 {
				t.Errorf("changed keys = %d, want %d", out.ChangedKeys, keys/100)
			}
			if out.ChangedCheckpointEntries < out.ChangedKeys || out.ChangedCheckpointEntries >= out.CheckpointEntries {
				t.Errorf("the 1%%-changed checkpoint wrote %d entries, want between %d and the full checkpoint's %d",
					out.ChangedCheckpointEntries, out.ChangedKeys, out.CheckpointEntries)
			}
			if out.FixedChangedKeys != 1000 || out.FixedChangedCheckpointEntries != out.FixedChangedKeys {
				t.Errorf("the fixed-change checkpoint wrote %d entries for %d changed keys, want 1000 for 1000",
					out.FixedChangedCheckpointEntries, out.FixedChangedKeys)
			}
		})
	}
}

// TestRunStateRejects checks that a bad job or key count is refused with
// a message, not run.
func TestRunStateRejects(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  StateConfig
	}{
		{"unknown job", StateConfig{Job: "python", Keys: 10}},
		{"no keys", StateConfig{Job: "sdk", Keys: 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Dir = t.TempDir()
			if _, err := RunState(context.Background(), tt.cfg); err == nil {
				t.Errorf("RunState(%+v) = nil error, want a refusal", tt.cfg)
			}
		})
	}
}
