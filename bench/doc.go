// Package bench holds weir's benchmark workloads and the harnesses that run
// each of their variants in its own child process, so that every variant's
// peak memory and CPU time are its own.
//
// windowed-sum: N generated events, keys uniform over K, event time
// advancing one millisecond per event in order, five-minute fixed windows
// and a per-key sum of an int64 amount with the default trigger. It runs as
// a Go SDK pipeline (sdk-wN, N workers), as the equivalent YAML pipeline
// (yaml-wN) and as a hand-written single-goroutine loop (baseline). Every
// variant must produce the same grand total and the same number of window
// results; the harness fails loudly otherwise.
//
// pubsub-to-sql: N JSON messages pre-published to a topic of the embedded
// broker, read by a raw durable consumer (the broker's limit) and by the
// YAML pipeline ReadFromPubSub → fixed windows → Combine → WriteToSql upsert
// with checkpoints, plus a paced, stateless ReadFromPubSub → WriteToSql
// append pipeline for publish-to-commit latency. Every SQL table is checked
// against the published messages; the harness fails loudly otherwise.
//
// state: a streaming count-and-sum per string key (Go SDK or YAML) whose
// source emits each of N keys once and then idles; it measures the live
// heap and the checkpoint's bytes per key held, and the checkpoint time for
// all keys and after 1% of them changed (RunState, `weir bench state`).
//
// nexmark change: a Nexmark query written in YAML (NexmarkYAMLSteps), or
// package nexmark's Go query as the job of a Go program, runs
// unbounded as a job of an in-process job service, its source rate-limited
// with wall-clock event times and its results written to a topic of the
// embedded broker; the harness samples the events the job reads and the
// latency of its results while it updates the job in place, rescales it
// and snapshots it (RunNexmarkChange, `weir bench nexmark --change`).
//
// Package bench may import weir (the SDK root package), runner, runner/contract, service, service/record,
// mtime, window, yamlpipe, io/pubsub, row, nexmark, state, sandbox and diff (the rehearse
// variant), client, internal/await and internal/natscluster (the failover variant: a NATS
// cluster in process, members as child processes, watched through their
// API), github.com/nats-io/nats.go (to
// publish asynchronously and to consume as the raw reference does) and the
// standard library. Only
// cmd/weir and tests import it.
package bench
