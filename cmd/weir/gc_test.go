package main

import "testing"

// TestProcsFor: weir doubles the processors on a small machine only, and
// never against the user's GOMAXPROCS or a CPU quota (a GOMAXPROCS below
// the CPU count).
func TestProcsFor(t *testing.T) {
	tests := []struct {
		name                string
		cpus, current, want int
		userSet             bool
	}{
		{"2 CPUs", 2, 2, 4, false},
		{"4 CPUs", 4, 4, 8, false},
		{"8 CPUs: as is", 8, 8, 8, false},
		{"the user's GOMAXPROCS", 2, 3, 3, true},
		{"the user's GOMAXPROCS equal to the CPUs", 2, 2, 2, true},
		{"a CPU quota of 1 on 4 CPUs", 4, 1, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := procsFor(tc.cpus, tc.current, tc.userSet); got != tc.want {
				t.Fatalf("procsFor(%d, %d, %v) = %d, want %d", tc.cpus, tc.current, tc.userSet, got, tc.want)
			}
		})
	}
}
