// Package bench holds weir's benchmark workloads and the harness that runs
// each of them in its own child process, so that every variant's peak memory
// and CPU time are its own.
//
// The workload is windowed-sum: N generated events, keys uniform over K,
// event time advancing one millisecond per event in order, five-minute fixed
// windows and a per-key sum of an int64 amount with the default trigger. It
// runs as a Go SDK pipeline (sdk-wN, N workers), as the equivalent YAML
// pipeline (yaml-wN) and as a hand-written single-goroutine loop (baseline).
// Every variant must produce the same grand total and the same number of
// window results; the harness fails loudly otherwise.
//
// Package bench may import the SDK (package weir), runner, mtime, window,
// yamlpipe and the standard library. Only cmd/weir and tests import it.
package bench
