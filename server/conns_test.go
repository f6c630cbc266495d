package server

import (
	"strings"
	"testing"
)

// TestConnCaps: the default caps follow the descriptor limit, leaving a
// reserve; a cap asked above what the limit leaves is lowered, with a
// note; the per-address cap never exceeds the total.
func TestConnCaps(t *testing.T) {
	for _, tc := range []struct {
		name              string
		max, perAddr      int
		limit             uint64
		known             bool
		wantTotal, wantPA int
		note              bool
	}{
		{"defaults at 4096", 0, 0, 4096, true, 3072, DefaultMaxConnectionsPerAddress, false},
		{"defaults at 1024", 0, 0, 1024, true, 768, DefaultMaxConnectionsPerAddress, false},
		{"defaults at a million", 0, 0, 1 << 20, true, MaxDefaultConnections, DefaultMaxConnectionsPerAddress, false},
		{"defaults, limit unknown", 0, 0, 0, false, MaxDefaultConnections, DefaultMaxConnectionsPerAddress, false},
		{"small limit", 0, 0, 200, true, 72, 72, false},
		{"tiny limit", 0, 0, 100, true, 50, 50, false},
		{"given below the limit", 500, 20, 4096, true, 500, 20, false},
		{"given above the limit", 10000, 0, 4096, true, 3072, DefaultMaxConnectionsPerAddress, true},
		{"no cap asked, the limit's kept", -1, -1, 4096, true, 3072, 3072, true},
		{"no cap, limit unknown", -1, -1, 0, false, 0, 0, false},
		{"per address above the total", 100, 500, 4096, true, 100, 100, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			total, pa, notes := connCaps(tc.max, tc.perAddr, tc.limit, tc.known)
			if total != tc.wantTotal || pa != tc.wantPA {
				t.Errorf("caps %d, %d per address; want %d, %d", total, pa, tc.wantTotal, tc.wantPA)
			}
			if (len(notes) > 0) != tc.note {
				t.Errorf("notes %q, want a note: %v", notes, tc.note)
			}
			for _, n := range notes {
				if !strings.Contains(n, "--max-connections") || !strings.Contains(n, "ulimit") {
					t.Errorf("note %q does not name the flag and the way out", n)
				}
			}
		})
	}
}
