package main

import (
	"strings"
	"testing"
)

// TestServerMaxSinkBuffer: --max-sink-buffer takes a byte size; anything
// else, zero included, is a usage error naming the flag, before the
// server opens anything.
func TestServerMaxSinkBuffer(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want int64
		bad  bool
	}{
		{v: "", want: 0},
		{v: "64MiB", want: 64 << 20},
		{v: "512MB", want: 512e6},
		{v: "4096", want: 4096},
		{v: "0", bad: true},
		{v: "-1MiB", bad: true},
		{v: "lots", bad: true},
	} {
		n, err := parseMaxSinkBuffer(tt.v)
		if tt.bad != (err != nil) || n != tt.want {
			t.Errorf("--max-sink-buffer %q: %d, %v; want %d (bad: %v)", tt.v, n, err, tt.want, tt.bad)
		}
		if !tt.bad {
			continue
		}
		r := runCLI(t, "", "server", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--max-sink-buffer", tt.v)
		if r.code != ExitUsage || !strings.Contains(r.stderr, "--max-sink-buffer") {
			t.Errorf("weir server --max-sink-buffer %q: exit %d, want %d naming the flag:\n%s", tt.v, r.code, ExitUsage, r.stderr)
		}
	}
}
