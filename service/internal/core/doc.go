// Package core is the job service's core: the job registry (records of
// package record, kept in the state store next to the keyed state and the
// checkpoints, so that a state transition is written atomically with a
// checkpoint), the job state machine's transitions, name guards and the
// registry lock (a Tx), every job's execution with its checkpoint loop,
// events, metrics and their history, storage and sink faults, admission of
// new jobs, rescaling, and the resumption of jobs at a restart.
//
// The flows built on it (snapshots, in-place update, replacements,
// rollback, the re-read) live in packages of their own above it and
// register with it through one small interface, Flow: the core calls
// every registered flow when it starts, when it resumes a job, when it
// loads a job's pipeline, before it starts an execution and when it
// answers a read; it never calls a flow by name.
//
// It may import service/record, runner, runner/contract, state, yamlpipe,
// manifest (the input manifests it stores), compat, errcode, graph, mtime, weir (the SDK root package, whose
// pipelines yamlpipe and Go programs build),
// github.com/cockroachdb/pebble/v2/vfs (the store's file system, which
// tests replace) and the standard library. It names no connector: what it
// asks of step code beyond running it (a backlog, a catch-up, whether a
// commit error is permanent) it asks through runner/contract's
// capabilities.
//
// # Lock ordering
//
// This section is the one place that states the service's locks (as NATS
// keeps locksordering.txt). Locks are taken in this order, never the other
// way round; a lock is never taken while one below it is held:
//
//  0. The guard of a request ID (Service.requests in package service, route.go), held by a
//     request with an ID from the lookup of its earlier answer to the
//     record of its own, so that two retries never both run. At the same
//     level, never together with a request's guard: the autoscaler's tick
//     (autoscale.Autoscale.mu), held across its rescales.
//  1. The name guard of a job name (Core.names, taken with LockName). It
//     serialises the operations that change a name's jobs or its lineage
//     record: submissions, Go programs' starts and takeovers, updates, UpdateOptions,
//     Drain, Cancel, recovery at Open, and a supervisor recording the end of
//     its execution (finish) or a failed checkpoint. It IS held across waits
//     for an execution: an update holds it through the whole handover, a
//     rescale through the pause. One name's guard at a time: no operation
//     holds two. Methods that need it held say so ("the caller holds the
//     name's guard").
//  2. Run.CpMu, one per execution. It serialises the execution's
//     checkpoints from taking to commit (periodic, final, at shutdown, and
//     an update's or rescale's pause), so that no checkpoint's state changes
//     are taken but not yet written when another is taken. It is held
//     across waits (barrier alignment, encoding, commit). An update holds
//     the old execution's cpMu and then takes the new execution's, before
//     the new one has a supervisor: nothing else can hold or wait for it.
//  3. The registry lock (Core.mu), held only as a Tx (tx.go): a *Tx
//     exists only inside the function Core.Update runs with the lock
//     held, and every store write is a method of *Tx (Apply,
//     WriteCheckpoint, WriteHandover, DropState, WriteSnapshot,
//     DeleteSnapshot, RestoreSnapshot, Transition, Emit, ...), so a
//     function that needs the lock takes a *Tx and the compiler checks
//     that it has one; Update is the one place the lock is taken. It
//     guards the writes of the running table, closing, and every write to
//     the store: each read-modify-write of registry records (job records,
//     name lineages, attempts, snapshots) happens with the store write
//     that lands it in one Tx, which also serialises the store's namespace
//     allocation. It is NEVER held while waiting for an execution (a
//     pause, a checkpoint, encoding, a commit, an end), nor while starting
//     one or committing sinks, nor across a broker call: only across
//     in-memory work and store writes. A goroutine Close waits for is
//     started by Spawn, whose WaitGroup Add happens in a Tx that found the
//     service not closing.
//  4. Leaves, never held while taking another lock: Run.smu (the
//     metrics sampler), Run.emu (the events an execution emits before
//     its job's start is recorded; taken in a Tx by Tx.ReleaseEvents),
//     jobHistory.mu (a job's metrics history), the name-guard table's
//     mutex, and the mutex of Core.Changes.
//
// Below every one of these, the state store keeps its own lock of which
// Pebble database is current (state/handle.go): taken inside each store
// call only to pick the database, never across a Pebble call, so that a
// reopen after a store failure (fault_resume.go) swaps the database under
// running reads. The retry loop that reopens the store holds no lock of
// the service while it does; it then resumes each job under the job's
// name guard (order 1), as recovery at Open does.
//
// Job events (events.go) are store writes like any other: in a Tx, a
// transition's event in the transition's own write, others through emit,
// which runs a Tx of its own (within a Tx, Tx.Emit does the same).
//
// A job snapshot (package snapshots) takes the name's guard and the execution's
// cpMu for its cut only (a checkpoint, with the store pinned in the same Tx
// as the checkpoint's write); the copy of the cut's state into the
// snapshot's key space holds neither, and a Tx only for its one commit.
// CreateFromSnapshot holds the new name's guard, and a Tx for its one
// write.
//
// Reads — Get, List, History, Metrics, RunningMetrics, ElementsRead,
// WaitJob, Events, FollowEvents, MetricsHistory, CheckpointHistograms, everything the API's describe, list and metrics call — take no
// lock but the leaves: they read registry records from the store (each
// record is written atomically, so a read sees one whole version of it)
// and live executions from the running table (a sync.Map). So a read never
// waits for a handover, a rescale, a checkpoint or a store write.
//
// Why a handover needs no re-read: every writer of a name's lineage and of
// its jobs' states holds the name's guard, and the only other writers of a
// job record — its execution's checkpoints, which set the last checkpoint
// and dead-letter fields — hold its cpMu. An update holds the guard from
// its first read and the old execution's cpMu from its pause, so the
// records it read first stay current until its one write, but for the
// fields a checkpoint finished in between may have set, which the handover
// sets itself (the last checkpoint is the handover's; the dead letters are
// the execution's counters).
package core
