package bench

import (
	"context"
	"strings"
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

// TestServerUpdateSwaps runs the server variant with three swaps: every
// swap's pause and baseline is reported, the maxima and percentiles agree
// with them, and the job read everything published.
func TestServerUpdateSwaps(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a job service")
	}
	out, err := RunServerUpdate(context.Background(), UpdateConfig{Keys: 2000, Rate: 2000, Mode: "update", Dir: t.TempDir(), Steady: 200 * time.Millisecond, Swaps: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.PausesMillis) != 3 || len(out.BaselinesMillis) != 3 {
		t.Fatalf("want 3 pauses and 3 baselines: %+v", out)
	}
	if out.PauseMillis != Percentile(out.PausesMillis, 100) || out.PauseP99Millis != out.PauseMillis {
		t.Errorf("max pause %v, p99 %v, pauses %v", out.PauseMillis, out.PauseP99Millis, out.PausesMillis)
	}
	if out.PauseP50Millis <= 0 || out.PauseP50Millis > out.PauseP99Millis || out.BaselineP50Millis > out.BaselineP99Millis {
		t.Errorf("percentiles out of order: %+v", out)
	}
}

// TestServerUpdateMigrate runs the server variant's in-place update with
// a declared state migration: the update goes through, the touch pass
// (one message per key, migrating each) is measured, and no key's init
// failed.
func TestServerUpdateMigrate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a job service")
	}
	out, err := RunServerUpdate(context.Background(), UpdateConfig{Keys: 2000, Rate: 2000, Mode: "update", Dir: t.TempDir(), Steady: 200 * time.Millisecond, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Migrate || out.TouchSeconds <= 0 || len(out.PausesMillis) != 1 {
		t.Fatalf("outcome %+v", out)
	}
	if _, err := RunServerUpdate(context.Background(), UpdateConfig{Keys: 10, Mode: "restore", Dir: t.TempDir(), Migrate: true}); err == nil || !strings.Contains(err.Error(), "mode update") {
		t.Errorf("a migration with mode restore: %v", err)
	}
}

// TestServerUpdateRekey runs the server variant's in-place update with a
// declared re-key (key k to k / 2): the update goes through, and after the
// touch pass the step holds half the keys with no reject.
func TestServerUpdateRekey(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a job service")
	}
	out, err := RunServerUpdate(context.Background(), UpdateConfig{Keys: 2001, Rate: 2000, Mode: "update", Dir: t.TempDir(), Steady: 200 * time.Millisecond, Rekey: true})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Rekey || out.KeysAfter != 1001 || len(out.PausesMillis) != 1 {
		t.Fatalf("outcome %+v", out)
	}
	if _, err := RunServerUpdate(context.Background(), UpdateConfig{Keys: 10, Mode: "update", Dir: t.TempDir(), Rekey: true, Migrate: true}); err == nil || !strings.Contains(err.Error(), "one migration at a time") {
		t.Errorf("an init and a re-key together: %v", err)
	}
}

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	for _, tc := range []struct {
		p    float64
		want float64
	}{{50, 3}, {99, 5}, {100, 5}, {1, 1}, {20, 1}, {21, 2}} {
		if got := Percentile(xs, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if xs[0] != 5 {
		t.Error("Percentile sorted its input")
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("empty: %v", got)
	}
}
