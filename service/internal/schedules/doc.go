// Package schedules is the job service's scheduler of partition runs
// (weir schedules): a schedule cuts time into partitions — fixed periods
// (--every) or the stretches between a cron expression's times (--cron),
// in UTC — and, as each becomes due (its end plus a delay), pins the
// partition's input files as an input manifest of the schedule's name and
// submits a partition run of its pipeline (a batch job that stages its
// rows and publishes them in one step, with a publication log). A failed
// run is retried with backoff against the same manifest; a partition whose
// files are not there yet waits for them. One run at a time: the job name
// is the partitions' single writer.
//
// A schedule has versions: weir schedules switch makes a new pipeline run
// from a given partition on (the old one keeps the partitions before it),
// and weir schedules rollback retires the newest version, so that the one
// before it runs every partition the retired one had not published — no
// partition published twice, none skipped.
//
// Its decisions are deterministic steps over the records and a time
// (decide.go), tested from tables; cadence.go cuts time into partitions
// and names them. It registers with the core as a core.Flow (Open starts
// its loop).
//
// It may import service/internal/core, service/record, manifest, state,
// errcode, internal/fileglob, github.com/robfig/cron/v3 and the standard
// library.
package schedules
