package bench

import (
	"context"
	"testing"
	"time"
)

// TestUpdateBenchSmall runs both modes of the update benchmark at a small
// size: the swap loses and duplicates nothing (Verified), and a pause is
// measured.
func TestUpdateBenchSmall(t *testing.T) {
	for _, mode := range []string{"update", "restore"} {
		out, err := RunUpdate(context.Background(), UpdateConfig{Keys: 20000, Rate: 20000, Mode: mode, Dir: t.TempDir(), Steady: 300 * time.Millisecond})
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if !out.Verified || out.PauseMillis <= 0 || out.Elements <= 20000 {
			t.Errorf("%s: %+v", mode, out)
		}
		t.Logf("%s: %+v", mode, out)
	}
}
