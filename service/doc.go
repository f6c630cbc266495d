// Package service is weir's job service: it owns the data directory, keeps
// the job registry, runs every job's execution with a checkpoint loop, and
// drives the job state machine (Dataflow's: PENDING → RUNNING → DONE;
// RUNNING → DRAINING → DRAINED; RUNNING/DRAINING → CANCELLING → CANCELLED;
// RUNNING/DRAINING → UPDATED when an update replaces the job, whose
// successor goes PENDING → RUNNING, or PENDING → DRAINING when it replaces
// a draining job; any non-terminal state → FAILED).
//
// The service speaks Go: jobs, states, errors with stable codes. It knows
// nothing of HTTP (package api serves it) or of the command line.
//
// This package is the service's front: Open assembles the core
// (service/internal/core: registry, executions, checkpoints, events,
// metrics, faults, restart) and the flows built on it, each in a package
// of its own — snapshots (service/internal/snapshots), the in-place update
// (service/internal/inplace), stop-and-replace and parallel replacement
// (service/internal/replace), rollback (service/internal/rollback) and the
// re-read of retained input (service/internal/rewind). It routes a
// submission or an update to the flow its service options ask for
// (route.go), answers a retried request ID as the first time, and answers
// the rest of its API by delegation (api.go). The registry's records are
// package service/record. The lock order is stated once, in package core.
//
// It may import service/internal/core, service/internal/autoscale, service/internal/snapshots,
// service/internal/inplace, service/internal/replace,
// service/internal/rollback, service/internal/rewind, service/internal/schedules,
// service/internal/tables, service/record,
// serviceopt, duration, errcode, state, manifest (input manifests),
// yamlpipe (a submitted template's
// rendering), sandbox and diff (the pre-flight rehearsal of
// weir_rehearse=required, sandbox reading the retained input from the
// broker) and the standard library. It must not import api, server or
// cmd/weir.
package service
