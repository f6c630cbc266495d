package cli

import (
	"errors"
	"testing"

	"github.com/spf13/cobra"
)

// TestErrorsCarryTheirExitCode: a usage error, a wrapped failure and a
// wrong argument count carry the exit code scripts match on, through
// wrapping; nil stays nil.
func TestErrorsCarryTheirExitCode(t *testing.T) {
	cmd := &cobra.Command{Use: "x"}
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"usage", UsageErrorf("--format %q", "xml"), ExitUsage},
		{"failure", WithCode(ExitFailure, errors.New("boom")), ExitFailure},
		{"bad format", CheckFormat("xml"), ExitUsage},
		{"argument count", ExactArgs("A", "B")(cmd, []string{"a"}), ExitUsage},
		{"wrapped", errors.Join(errors.New("context"), WithCode(ExitIncompatible, errors.New("no"))), ExitIncompatible},
	}
	for _, tt := range tests {
		var ee *ExitError
		if !errors.As(tt.err, &ee) || ee.Code != tt.want {
			t.Errorf("%s: %v carries %+v, want code %d", tt.name, tt.err, ee, tt.want)
		}
	}
	if WithCode(ExitFailure, nil) != nil || CheckFormat(FormatJSON) != nil || ExactArgs("A")(cmd, []string{"a"}) != nil {
		t.Error("a nil error or valid input became an error")
	}
}

// TestNumber: a whole sum prints without a fraction, anything else as %g.
func TestNumber(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{575, "575"},
		{-50, "-50"},
		{2.5, "2.5"},
		{1e16, "1e+16"},
	}
	for _, tt := range tests {
		if got := Number(tt.in); got != tt.want {
			t.Errorf("Number(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestBytes: sizes read in binary units.
func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"},
		{5 << 20, "5.0 MiB"}, {3 << 30, "3.0 GiB"}, {2 << 40, "2.0 TiB"}, {2048 << 40, "2048.0 TiB"},
	} {
		if got := Bytes(tc.n); got != tc.want {
			t.Errorf("Bytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestArgumentCountShowsTheUsage: a wrong argument count names what the
// command takes and shows its usage line, which says what goes in a flag
// instead (a snapshot's job is --job-id, as gcloud's is).
func TestArgumentCountShowsTheUsage(t *testing.T) {
	cmd := &cobra.Command{Use: "create --job-id ID|NAME"}
	cmd.Flags().String("job-id", "", "")
	tests := []struct {
		name  string
		names []string
		args  []string
		want  string
	}{
		{"none taken", nil, []string{"orders-sink"}, "create takes no arguments, got 1 (orders-sink); usage: create --job-id ID|NAME [flags]"},
		{"two taken", []string{"JOB", "FILE"}, []string{"a"}, "create takes 2 argument(s) (JOB FILE), got 1; usage: create --job-id ID|NAME [flags]"},
	}
	for _, tt := range tests {
		err := ExactArgs(tt.names...)(cmd, tt.args)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}
