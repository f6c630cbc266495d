package main

import (
	"os"
	"runtime/debug"
	"syscall"
)

// DefaultGCPercent is the garbage collector target weir sets when GOGC is
// not in the environment. A streaming engine keeps a small live heap and
// allocates fast, so Go's default of 100 runs a collection every few
// megabytes — with write barriers on for much of the time. 400 trades a
// larger heap for about a quarter of the collections (docs/BENCHMARKS.md).
const DefaultGCPercent = 400

// tuneGC applies weir's garbage collector defaults, unless the user set
// GOGC or GOMEMLIMIT: GC percent 400, and a soft memory limit of 3/4 of the
// machine's memory so that a larger heap target never runs the process out
// of memory (the collector works harder as the limit nears).
func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(DefaultGCPercent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		var si syscall.Sysinfo_t
		if err := syscall.Sysinfo(&si); err == nil && si.Totalram > 0 {
			total := uint64(si.Totalram) * uint64(si.Unit)
			debug.SetMemoryLimit(int64(total / 4 * 3))
		}
	}
}
