package schedules

import (
	"fmt"
	"time"

	"github.com/weir-dev/weir/service/record"
)

// The scheduler's decisions are deterministic steps over records and a
// time (this file): the loop reads the records, calls them, and carries
// out what they return. decide_test.go drives them from tables.

// maxBackoff caps the pause between two attempts of a partition.
const maxBackoff = time.Hour

// waitingRecheck is how long a partition whose input is not there yet
// waits before its files are looked for again.
const waitingRecheck = time.Minute

// Step is what the scheduler does next for a schedule.
type Step struct {
	// Start is set when a run starts: Run is the partition (an existing
	// run retried or checked again, or a new one when New), Version the
	// pipeline it runs.
	Start   bool
	New     bool
	Run     record.ScheduleRun
	Version record.ScheduleVersion
	// Why says why nothing starts (for describe and tests).
	Why string
}

// Decide returns the next step of sch, whose runs (by partition start)
// are runs, at now, with cadence c. One run at a time: a running run
// means nothing starts (one writer per job name). Of the partitions ready
// to start — a waiting or retrying run whose time has come, and the
// partition at sch.Next once it is due (its end plus the delay) — the
// earliest starts.
func Decide(sch *record.Schedule, c Cadence, runs []record.ScheduleRun, now time.Time) Step {
	if why, ok := blocked(sch, runs); ok {
		return Step{Why: why}
	}
	delay := durationOr(sch.Delay, 0)
	pick := dueRetry(runs, now)
	end := c.End(sch.Next)
	due := end.Add(delay)
	newDue := !end.IsZero() && !due.After(now)
	if newDue && (pick == nil || sch.Next.Before(pick.Start)) {
		id := PartitionID(sch.PartitionTemplate, sch.Next)
		return startStep(sch, record.ScheduleRun{Partition: id, Start: sch.Next, End: end, Due: due, Status: record.RunWaiting}, true)
	}
	if pick != nil {
		return startStep(sch, *pick, false)
	}
	if end.IsZero() {
		return Step{Why: "the cron expression fires no more"}
	}
	return Step{Why: fmt.Sprintf("next partition %s is due at %s", PartitionID(sch.PartitionTemplate, sch.Next), due.Format(time.RFC3339))}
}

// blocked says why no run of sch starts now, if none may: it is paused, or
// one of its runs is running (one writer per job name).
func blocked(sch *record.Schedule, runs []record.ScheduleRun) (string, bool) {
	if sch.Paused {
		return "paused", true
	}
	for _, r := range runs {
		if r.Status == record.RunRunning {
			return fmt.Sprintf("partition %s is running (job %s)", r.Partition, r.JobID), true
		}
	}
	return "", false
}

// dueRetry returns the first of runs that waits or retries and whose time
// has come, or nil.
func dueRetry(runs []record.ScheduleRun, now time.Time) *record.ScheduleRun {
	for i := range runs {
		r := &runs[i]
		if (r.Status == record.RunWaiting || r.Status == record.RunRetrying) && (r.NextAttempt == nil || !r.NextAttempt.After(now)) {
			return r
		}
	}
	return nil
}

// startStep is the step that starts run r (isNew: a partition without a
// run yet) with the version that owns r's start; nothing starts when no
// version does.
func startStep(sch *record.Schedule, r record.ScheduleRun, isNew bool) Step {
	v, ok := sch.ActiveVersion(r.Start)
	if !ok {
		return Step{Why: fmt.Sprintf("no version of the pipeline runs partition %s", r.Partition)}
	}
	r.Version = v.Version
	return Step{Start: true, New: isNew, Run: r, Version: v}
}

// Ended returns run after its job ended in state (terminal), with the
// job's error, at now: published when DONE; else retrying after the
// backoff while attempts remain, failed when none do.
func Ended(sch *record.Schedule, run record.ScheduleRun, state record.JobState, jobErr string, now time.Time) record.ScheduleRun {
	run.UpdateTime = now
	run.NextAttempt = nil
	if state == record.StateDone {
		run.Status, run.Error = record.RunPublished, ""
		return run
	}
	run.Error = fmt.Sprintf("job %s ended %s", run.JobID, state)
	if jobErr != "" {
		run.Error += ": " + jobErr
	}
	return failedAttempt(sch, run, now)
}

// failedAttempt returns run after an attempt failed at now.
func failedAttempt(sch *record.Schedule, run record.ScheduleRun, now time.Time) record.ScheduleRun {
	run.UpdateTime = now
	if run.Attempts >= maxAttempts(sch) {
		run.Status, run.NextAttempt = record.RunFailed, nil
		return run
	}
	next := now.Add(Backoff(sch, run.Attempts))
	run.Status, run.NextAttempt = record.RunRetrying, &next
	return run
}

// Waiting returns run when its input is not there yet at now (why says
// what is missing): checked again a minute later.
func Waiting(run record.ScheduleRun, why string, now time.Time) record.ScheduleRun {
	next := now.Add(waitingRecheck)
	run.Status, run.Error, run.NextAttempt, run.UpdateTime = record.RunWaiting, why, &next, now
	return run
}

// Backoff is the pause after the attempts-th failed attempt: the
// schedule's retry backoff, doubled for each attempt after the first, at
// most an hour.
func Backoff(sch *record.Schedule, attempts int) time.Duration {
	d := durationOr(sch.RetryBackoff, DefaultRetryBackoff)
	for i := 1; i < attempts && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// maxAttempts is sch's MaxAttempts, DefaultMaxAttempts when unset.
func maxAttempts(sch *record.Schedule) int {
	if sch.MaxAttempts > 0 {
		return sch.MaxAttempts
	}
	return DefaultMaxAttempts
}

// durationOr parses s, def when it is empty or not a duration (the
// stored values were checked when the schedule was created).
func durationOr(s string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(s); err == nil {
		return d
	}
	return def
}
