// Package service is weir's job service: it owns the data directory, keeps
// the job registry (in the state store, next to the keyed state and the
// checkpoints, so that a state transition can be written atomically with a
// checkpoint), runs every job's execution with a checkpoint loop, and
// drives the job state machine (Dataflow's: PENDING → RUNNING → DONE;
// RUNNING → DRAINING → DRAINED; RUNNING/DRAINING → CANCELLING → CANCELLED;
// any non-terminal state → FAILED).
//
// The service speaks Go: jobs, states, errors with stable codes. It knows
// nothing of HTTP (package api serves it) or of the command line.
//
// It may import runner, state, yamlpipe, compat, errcode, graph, mtime,
// weir (the SDK root package, whose pipelines yamlpipe builds) and the
// standard library. It must not import api, server or cmd/weir.
//
// # Lock ordering
//
// Service.mu is the only lock. It guards the in-memory table of running
// jobs and serialises every read-modify-write of registry records (job
// records, name lineages, including the ones written together with a
// checkpoint). It is never held while waiting for an execution (taking a
// checkpoint, draining, waiting for the end); only while writing to the store.
package service
