package schedules

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/weir-dev/weir/service/record"
)

// File-set schedules (record.Schedule.FileSets): a partition is not a
// range of time but a set of files that arrives. The input patterns name
// the partition with {partition}, a whole path segment or a segment's
// part between literal text (/data/in/{partition}/*.jsonl,
// /data/in/sales-{partition}.csv); every value of {partition} the
// patterns match on disk is one partition. A partition is due once its
// ready file exists (ReadyFile, a template with {partition}), or, without
// one, once none of its files changed for the schedule's delay. The
// partitions run once each, in the order they were found (by ID among
// those found at once), and a partition's run record starts at the time it
// was found: a version runs the partitions found from its From on.

// partitionToken names the partition in a file-set schedule's templates.
const partitionToken = "{partition}"

// FileSet is one partition a file-set schedule found on disk.
type FileSet struct {
	// ID is the value of {partition}.
	ID string
	// Newest is the latest modification time of its files.
	Newest time.Time
	// Ready says its ready file exists (a schedule without one: false).
	Ready bool
}

// CheckFileSetTemplates checks the templates of a file-set schedule: every
// input pattern has {partition} once, as a path segment or between
// literal text in one, and no time field; side inputs and the ready file
// may use {partition}, not the time fields.
func CheckFileSetTemplates(files []string, sides map[string]string, ready string) error {
	if len(files) == 0 {
		return fmt.Errorf("give the partitions' input files, --files PATTERN with {partition} (each value of {partition} found on disk is a partition)")
	}
	for _, f := range files {
		if _, _, _, err := splitPartition(f); err != nil {
			return err
		}
	}
	all := append([]string{ready}, files...)
	for _, s := range sides {
		all = append(all, s)
	}
	for _, t := range all {
		for _, f := range templateFields {
			if strings.Contains(t, f.token) {
				return fmt.Errorf("%s: a file-set schedule's partitions are named by {partition}, not by time: drop %s", t, f.token)
			}
		}
	}
	return nil
}

// splitPartition splits pattern at its {partition}: the directory pattern
// before the segment holding it, and the segment's literal text before and
// after it (the rest of the path comes after that segment).
func splitPartition(pattern string) (segment int, pre, post string, err error) {
	if strings.Count(pattern, partitionToken) != 1 {
		return 0, "", "", fmt.Errorf("%s: a file-set schedule's pattern names its partition with {partition}, once", pattern)
	}
	segs := strings.Split(filepath.ToSlash(pattern), "/")
	for i, s := range segs {
		p, q, ok := strings.Cut(s, partitionToken)
		if !ok {
			continue
		}
		if strings.ContainsAny(p+q, `*?[\`) {
			return 0, "", "", fmt.Errorf("%s: the text around {partition} in its path segment must be literal (no * ? [ ])", pattern)
		}
		return i, p, q, nil
	}
	return 0, "", "", fmt.Errorf("%s: no {partition}", pattern)
}

// DiscoverFileSets lists the partitions sch's input patterns match on disk
// now, by ID.
func DiscoverFileSets(sch *record.Schedule) (map[string]*FileSet, error) {
	sets := map[string]*FileSet{}
	for _, pattern := range sch.Files {
		seg, pre, post, err := splitPartition(pattern)
		if err != nil {
			return nil, err
		}
		matches, err := filepath.Glob(strings.Replace(pattern, partitionToken, "*", 1))
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", pattern, err)
		}
		for _, m := range matches {
			segs := strings.Split(filepath.ToSlash(m), "/")
			if seg >= len(segs) {
				continue
			}
			s := segs[seg]
			if !strings.HasPrefix(s, pre) || !strings.HasSuffix(s, post) || len(s) <= len(pre)+len(post) {
				continue
			}
			id := s[len(pre) : len(s)-len(post)]
			fi, err := os.Stat(m)
			if err != nil || fi.IsDir() {
				continue // gone meanwhile, or a directory the glob matched
			}
			fs := sets[id]
			if fs == nil {
				fs = &FileSet{ID: id}
				sets[id] = fs
			}
			if fi.ModTime().After(fs.Newest) {
				fs.Newest = fi.ModTime()
			}
		}
	}
	if sch.ReadyFile != "" {
		for id, fs := range sets {
			_, err := os.Stat(Expand(sch.ReadyFile, time.Time{}, id))
			fs.Ready = err == nil
			sets[id] = fs
		}
	}
	return sets, nil
}

// DecideFileSets is Decide for a file-set schedule: sets are the
// partitions found on disk now. A waiting or retrying run whose time has
// come starts first; else the first found partition (by ID) that has no
// run and is due — its ready file exists, or, without one, its files are
// older than the delay — starts as a new run found at now (after the
// newest run, so that runs keep the order they were found in).
func DecideFileSets(sch *record.Schedule, runs []record.ScheduleRun, sets map[string]*FileSet, now time.Time) Step {
	if sch.Paused {
		return Step{Why: "paused"}
	}
	for _, r := range runs {
		if r.Status == record.RunRunning {
			return Step{Why: fmt.Sprintf("partition %s is running (job %s)", r.Partition, r.JobID)}
		}
	}
	has := map[string]bool{}
	for i := range runs {
		r := &runs[i]
		has[r.Partition] = true
		if (r.Status == record.RunWaiting || r.Status == record.RunRetrying) && (r.NextAttempt == nil || !r.NextAttempt.After(now)) {
			v, ok := sch.ActiveVersion(r.Start)
			if !ok {
				return Step{Why: fmt.Sprintf("no version of the pipeline runs partition %s", r.Partition)}
			}
			run := *r
			run.Version = v.Version
			return Step{Start: true, Run: run, Version: v}
		}
	}
	ids := make([]string, 0, len(sets))
	for id := range sets {
		if !has[id] {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	delay := durationOr(sch.Delay, 0)
	why := "no new file set"
	for _, id := range ids {
		fs := sets[id]
		switch {
		case sch.ReadyFile != "" && !fs.Ready:
			why = fmt.Sprintf("file set %s waits for its ready file %s", id, Expand(sch.ReadyFile, time.Time{}, id))
			continue
		case sch.ReadyFile == "" && fs.Newest.Add(delay).After(now):
			why = fmt.Sprintf("file set %s is due at %s (its files unchanged for %s)", id, fs.Newest.Add(delay).UTC().Format(time.RFC3339), delay)
			continue
		}
		found := now
		if n := len(runs); n > 0 && !found.After(runs[n-1].Start) {
			found = runs[n-1].Start.Add(time.Nanosecond)
		}
		r := record.ScheduleRun{Partition: id, Start: found, Due: now, Status: record.RunWaiting}
		v, ok := sch.ActiveVersion(found)
		if !ok {
			return Step{Why: fmt.Sprintf("no version of the pipeline runs partition %s", id)}
		}
		r.Version = v.Version
		return Step{Start: true, New: true, Run: r, Version: v}
	}
	return Step{Why: why}
}
