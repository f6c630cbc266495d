package schedules

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/internal/fileglob"
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
			if strings.Contains(s, "**") {
				return 0, "", "", fmt.Errorf("%s: ** may come only after the {partition} segment (it crosses directories, so the segment that names a partition would move)", pattern)
			}
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
		matches, err := fileglob.Glob(strings.Replace(pattern, partitionToken, "*", 1))
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
	if why, ok := blocked(sch, runs); ok {
		return Step{Why: why}
	}
	if r := dueRetry(runs, now); r != nil {
		return startStep(sch, *r, false)
	}
	has := map[string]bool{}
	for _, r := range runs {
		has[r.Partition] = true
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
		return startStep(sch, record.ScheduleRun{Partition: id, Start: found, Due: now, Status: record.RunWaiting}, true)
	}
	return Step{Why: why}
}

// createFileSets is Create for a file-set schedule: no cadence, the
// partitions the files' {partition} names as they arrive.
func (s *Schedules) createFileSets(req CreateRequest, now time.Time) (*record.Schedule, error) {
	switch {
	case req.Every != "" || req.Cron != "":
		return nil, errcode.Errorf(errcode.InvalidRequest, "schedule %s: give --every, --cron or --file-sets, one of them: a partition is a range of time or a set of files", req.Name)
	case !req.Start.IsZero() || req.PartitionTemplate != "":
		return nil, errcode.Errorf(errcode.InvalidRequest, "schedule %s: a file-set schedule's partitions are the values of {partition} found on disk: drop --start and --partition-template", req.Name)
	}
	if err := CheckFileSetTemplates(req.Files, req.SideInputs, req.ReadyFile); err != nil {
		return nil, errcode.Errorf(errcode.InvalidRequest, "schedule %s: %w", req.Name, err)
	}
	sch := &record.Schedule{Name: req.Name, JobName: req.JobName, FileSets: true, ReadyFile: req.ReadyFile, Start: now,
		Delay: "0s", Files: req.Files, SideInputs: req.SideInputs, MaxAttempts: req.MaxAttempts,
		RetryBackoff: DefaultRetryBackoff.String(), CreateTime: now, UpdateTime: now}
	if err := runOptions(sch, req); err != nil {
		return nil, err
	}
	if err := s.checkFiles(sch); err != nil {
		return nil, err
	}
	v := record.ScheduleVersion{Version: 1, Pipeline: req.Pipeline, PipelineFile: req.PipelineFile, BaseDir: req.BaseDir,
		Options: req.Options, From: now, CreateTime: now}
	if err := s.checkPipeline(sch, v); err != nil {
		return nil, err
	}
	sch.Versions = []record.ScheduleVersion{v}
	if err := s.writeNew(sch); err != nil {
		return nil, err
	}
	s.Opts.Logger.Info("schedule created", "schedule", sch.Name, "job_name", sch.JobName, "file_sets", sch.Files, "ready_file", sch.ReadyFile)
	return sch, nil
}

// fileSetFrom is where a switch of file-set schedule sch from partition
// id ("": the first not published or running) starts the new version:
// that partition's run when it has one, else the file sets found from now
// on. It returns the version's From and FromPartition.
func fileSetFrom(sch *record.Schedule, id string, now time.Time) (time.Time, string) {
	if id == "" {
		if r := firstOpenRun(sch); r != nil {
			return r.Start, r.Partition
		}
		return now, ""
	}
	for _, r := range sch.Runs {
		if r.Partition == id {
			return r.Start, id
		}
	}
	return now, id
}
