package bench

import (
	"context"
	"log/slog"
	"testing"
)

// TestRunSkew runs the skew benchmark small: an even and an 80 % skewed
// partition both sum exactly (RunSkew checks the keys, the totals and the
// counts against the generated input), and the hot key gets about its
// share of the rows.
func TestRunSkew(t *testing.T) {
	for _, share := range []float64{0, 0.8} {
		out, err := RunSkew(context.Background(), SkewConfig{Rows: 20_000, Keys: 100, HotShare: share, Workers: 2, Dir: t.TempDir()}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("hot share %v: %v", share, err)
		}
		got := float64(out.HotRows) / float64(out.Rows)
		if got < share-0.02 || got > share+0.02 {
			t.Errorf("hot share %v: the hot key got %.3f of the rows", share, got)
		}
		if out.OutputKeys < 90 {
			t.Errorf("hot share %v: %d keys written", share, out.OutputKeys)
		}
	}
}
