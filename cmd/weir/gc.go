package main

import (
	"os"
	"runtime"
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

// smallMachineCPUs is the largest CPU count on which weir runs twice as
// many Go processors as CPUs (tuneProcs).
const smallMachineCPUs = 4

// tuneProcs doubles GOMAXPROCS on a machine of at most smallMachineCPUs
// CPUs, unless the user set GOMAXPROCS or a CPU quota already bounds it
// (Go sets GOMAXPROCS from the cgroup's quota; more threads than a quota
// allows would be throttled in bursts). A job's data passes through a
// chain of goroutines (broker, client, source, workers, sink); with one
// processor per CPU, a goroutine that becomes runnable waits for a
// processor held by CPU-bound work (a garbage-collection cycle's mark
// worker takes a quarter of the processors for seconds at a large heap, a
// compaction, a snapshot's copy) until the scheduler preempts it, 10 ms
// at a time. With twice the processors the kernel interleaves them
// instead. On 2 CPUs, with 1M keys of state at 20,000 messages/s, the
// update pause over 100 swaps went from p50 46 / p99 316 ms to 27 / 138 ms
// (docs/BENCHMARKS.md).
func tuneProcs() {
	_, set := os.LookupEnv("GOMAXPROCS")
	if n := procsFor(runtime.NumCPU(), runtime.GOMAXPROCS(0), set); n != runtime.GOMAXPROCS(0) {
		runtime.GOMAXPROCS(n)
	}
}

// procsFor is tuneProcs' choice: the processors to run on a machine of
// cpus CPUs whose GOMAXPROCS is now current (set by the user when
// userSet).
func procsFor(cpus, current int, userSet bool) int {
	if userSet || cpus > smallMachineCPUs || current != cpus {
		return current
	}
	return 2 * cpus
}
