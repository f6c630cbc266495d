package benchcmd

import (
	"strings"
	"testing"

	"github.com/weir-dev/weir/bench"
)

// TestWriteTargets: the "Targets:" section of a benchmark report, met and
// missed, and nothing without targets.
func TestWriteTargets(t *testing.T) {
	tests := []struct {
		name    string
		targets []bench.Target
		want    string
	}{
		{
			name: "targets",
			targets: []bench.Target{
				{Variant: "sdk-w1", Description: "events/s", Want: 100, Got: 2500, Met: true},
				{Variant: "sdk-w2", Description: "ratio", Want: 1.5, Got: 0.75},
			},
			want: "\nTargets:\n  sdk-w1   events/s: got 2500, want 100.00: met\n  sdk-w2   ratio: got 0.75, want 1.50: MISSED by 50%\n",
		},
		{name: "no targets", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			writeTargets(&b, tt.targets)
			if got := b.String(); got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
