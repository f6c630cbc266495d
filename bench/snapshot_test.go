package bench

import (
	"context"
	"testing"
	"time"
)

// TestSnapshotBenchSmall runs the snapshot benchmark at a small size: every
// figure is measured, the exported file imports as the same snapshot, and
// the job started from the snapshot counted every message once (Verified).
// No timing is asserted.
func TestSnapshotBenchSmall(t *testing.T) {
	out, err := RunSnapshot(context.Background(), SnapshotConfig{Keys: 2000, Rate: 2000, Dir: t.TempDir(),
		Steady: 300 * time.Millisecond, CheckpointInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", out)
	if !out.Verified || out.Elements <= out.Keys {
		t.Errorf("not verified: %+v", out)
	}
	for name, v := range map[string]float64{"checkpoint pause": out.CheckpointPauseMillis, "snapshot pause": out.SnapshotPauseMillis,
		"ready": out.ReadyMillis, "export": out.ExportMBps, "import": out.ImportMBps, "restore": out.RestoreFirstMillis,
		"from snapshot": out.FromSnapshotFirstMillis, "pause ratio": out.PauseRatio} {
		if v <= 0 {
			t.Errorf("%s: %v, want a measured figure", name, v)
		}
	}
	if out.DiskSizeBytes <= 0 || out.FileBytes <= 0 || out.ReadyMillis < out.CutMillis {
		t.Errorf("sizes/times: %+v", out)
	}
}
