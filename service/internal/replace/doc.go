// Package replace is the job service's automated replacement of a running
// job by a new job that does not inherit its state in memory:
// stop-and-replace (stop.go: the old job drains, then the new one starts,
// re-reading retained input by default, handing subscriptions over under a
// new name) and parallel replacement (parallel*.go: both run for an
// overlap, writing SQL tables behind façade views, the old job drains once
// the cut-over rule says every window it owns has fired, and its
// generation is compacted into the new one's after the rollback
// retention). A rollback (package rollback) is a stop-and-replace too.
//
// A flow's durable state is its new job's record (record.Replacement). Its
// decisions are deterministic steps (package flowstep: records and what
// the driver observed in, actions out); a driver goroutine (driver.go)
// reads the records, asks the step, and applies the actions, each with
// the store write or broker call it names, and a restarted service
// resumes every flow from its records.
//
// It registers with the core as a core.Flow: it resumes its flows at
// Start, gives a job's sinks the windows they own and a parallel
// replacement's façades at load, and adds a flow's progress to a read.
//
// It may import service/internal/core, service/internal/flowstep,
// service/internal/snapshots, runner/contract (the capabilities of step
// code it configures, the broker's subscriptions and the SQL tables behind
// façade views as it manages them),
// service/internal/rewind, service/record, graph, mtime, window, state,
// errcode, duration, serviceopt, diff (the parity gate's comparison),
// yamlpipe (which hands it the SQL sink's administration) and the
// standard library. It does not import the connectors (io/...): the
// broker it is given and the SQL sink implement what it declares.
package replace
