// Package record holds the job service's registry records: the job record
// (Job, its states and transitions, options, lineage), the replacement
// flows' durable state carried on it (Replacement, ParallelFlow,
// RewindPoint, CatchUp), metrics, events and snapshot records. They are
// stored as JSON in the state store (keys: JobKey, LineageKey,
// SnapshotKey) and served by the API as they are.
//
// A record is data: this package does no I/O, takes no lock and starts no
// goroutine. The one behaviour it owns is the job state machine
// (Transition), so that every package that changes a job's state goes
// through the same table. The flows' deterministic steps decide from
// records alone.
//
// It may import errcode, graph (a job's type follows its graph's
// sources), runner/contract (the re-read starts a CatchUp records) and the
// standard library.
package record
