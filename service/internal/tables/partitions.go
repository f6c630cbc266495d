package tables

import (
	"context"
	"sort"
	"strings"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"
)

// Partitions: the publication log of a job name's partition runs (weir
// partitions list), read from the databases its WriteToSql sinks publish
// to and the publication manifests of its file sinks: the log's entries,
// the staging tables or version directories left by runs that did not
// publish (failed, cancelled or shadow runs) and the running run.

// Partitions returns the partitions of job name's partition runs in every
// target table its sinks publish to, by partition, then target.
// JOB_NOT_FOUND when no job has the name.
func (s *Tables) Partitions(ctx context.Context, name string) ([]record.PartitionRun, error) {
	entries, err := s.partitions(ctx, name)
	if err != nil {
		return nil, err
	}
	out := make([]record.PartitionRun, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.run)
	}
	return out, nil
}

// partitionEntry is one entry of the publication log view, and for a
// staged or shadow entry how to remove what it left.
type partitionEntry struct {
	run record.PartitionRun
	// replaced marks a published file version that a later publication
	// of its partition replaced and whose directory is still there
	// (prune's replaced status).
	replaced bool
	// remove drops the staging table or removes the version directory;
	// nil for running entries and for published ones but replaced.
	remove func(ctx context.Context) error
}

// stageDropper is the SQL table administration's removal of a staging
// table (sqlsink.Admin.DropStage).
type stageDropper interface {
	DropStage(ctx context.Context, t contract.FacadeTable, stage string) error
}

// versionRemover is a staged file sink's removal of its run's version
// directory (files.StagedSink.RemoveStagedVersion).
type versionRemover interface {
	RemoveStagedVersion(ctx context.Context) (string, error)
}

// replacedRemover is a staged file sink's removal of a replaced published
// version (files.StagedSink.RemoveReplacedVersion).
type replacedRemover interface {
	RemoveReplacedVersion(ctx context.Context, version string) error
}

// partitions is Partitions with the removal of each staged or shadow
// entry.
func (s *Tables) partitions(ctx context.Context, name string) ([]partitionEntry, error) {
	all, err := s.c.List(core.StatusAll)
	if err != nil {
		return nil, err
	}
	var jobs []*record.Job
	for _, j := range all {
		if j.Name == name {
			jobs = append(jobs, j)
		}
	}
	if len(jobs) == 0 {
		return nil, errcode.Errorf(errcode.JobNotFound, "no job is named %q (weir jobs list)", name)
	}
	// Newest first: the newest run of a partition gives its status.
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].CreateTime.After(jobs[b].CreateTime) })
	type target struct {
		tbl  contract.SQLSinkTable
		runs []*record.Job // partition runs writing it, newest first
	}
	byKey := map[string]*target{}
	var targets []*target
	type fileRun struct {
		job     *record.Job
		sink    contract.PublishingFileSink // the run's sink
		version string                      // its version directory
		staged  bool                        // the directory is there
	}
	type fileTarget struct {
		path string
		sink contract.PublishingFileSink // one run's, to read the manifest
		runs []fileRun
	}
	fileByPath := map[string]*fileTarget{}
	var fileTargets []*fileTarget
	for _, j := range jobs {
		if j.SDK == record.SDKGo || j.Pipeline == "" || j.Partition == "" {
			continue
		}
		p, err := s.c.LoadGraph(j)
		if err != nil {
			continue // a pipeline that no longer loads: nothing to read
		}
		for _, code := range p.Program().Code {
			if fs, ok := code.(contract.PublishingFileSink); ok {
				path, version, staged := fs.StagedVersion()
				t := fileByPath[path]
				if t == nil {
					t = &fileTarget{path: path, sink: fs}
					fileByPath[path] = t
					fileTargets = append(fileTargets, t)
				}
				t.runs = append(t.runs, fileRun{job: j, sink: fs, version: version, staged: staged})
				continue
			}
			sk, ok := code.(contract.SQLTableSink)
			if !ok || sk.SQLSinkTable().StageTarget == "" {
				continue
			}
			c := sk.SQLSinkTable()
			key := c.Driver + "\x00" + c.DSN + "\x00" + c.StageTarget
			t := byKey[key]
			if t == nil {
				t = &target{tbl: c}
				byKey[key] = t
				targets = append(targets, t)
			}
			t.runs = append(t.runs, j)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, tableTimeout)
	defer cancel()
	out := []partitionEntry{}
	for _, t := range targets {
		st := t.tbl.FacadeTable
		st.Table = t.tbl.StageTarget
		pubs, stages, err := s.sql.PartitionLog(ctx, st, name)
		if err != nil {
			return nil, errcode.Errorf(errcode.SinkUnavailable, "reading the publication log of %s: %w", st.Table, err)
		}
		base := record.PartitionRun{Target: st.Table, Driver: st.Driver, DSN: st.DSN}
		published := map[string]bool{}
		for _, p := range pubs {
			r := base
			r.Partition, r.Status, r.Table, r.JobID, r.ManifestDigest = p.Partition, "published", p.Target, p.JobID, p.ManifestDigest
			r.OutputDigest, r.Rows, r.Replaced, r.PublishedAt = p.OutputDigest, p.Rows, p.Replaced, p.PublishedAt
			out = append(out, partitionEntry{run: r})
			published[p.JobID] = true
		}
		for _, j := range t.runs {
			if published[j.ID] {
				continue
			}
			stage := s.sql.StageTable(st.Table, j.Partition, j.ID)
			r := base
			r.Partition, r.Table, r.JobID, r.ManifestDigest = j.Partition, stage, j.ID, j.ManifestDigest
			_, bare, _ := strings.Cut(stage, ".")
			if bare == "" {
				bare = stage
			}
			if r.Status = unpublishedStatus(j, stages[strings.ToLower(bare)]); r.Status != "" {
				e := partitionEntry{run: r}
				if d, ok := s.sql.(stageDropper); ok && r.Status != "running" {
					e.remove = func(ctx context.Context) error { return d.DropStage(ctx, st, stage) }
				}
				out = append(out, e)
			}
		}
	}
	for _, t := range fileTargets {
		fp, err := t.sink.FilePublications()
		if err != nil {
			return nil, errcode.Errorf(errcode.SinkUnavailable, "reading the publication manifest of %s: %w", t.path, err)
		}
		base := record.PartitionRun{Target: t.path, Driver: record.DriverFiles, DSN: fp.Manifest}
		published := map[string]bool{}
		// A partition's last log entry is the version it reads now; the
		// earlier ones were replaced.
		current := map[string]int{}
		for i, p := range fp.Published {
			current[p.Partition] = i
		}
		for i, p := range fp.Published {
			r := base
			r.Partition, r.Status, r.Table, r.JobID, r.ManifestDigest = p.Partition, "published", p.Version, p.JobID, p.ManifestDigest
			r.OutputDigest, r.Rows, r.Replaced, r.PublishedAt = p.OutputDigest, p.Rows, p.Replaced, p.PublishedAt
			e := partitionEntry{run: r}
			if current[p.Partition] != i && !p.Pruned {
				e.replaced = true
				if v, ok := t.sink.(replacedRemover); ok {
					version := p.Version
					e.remove = func(ctx context.Context) error { return v.RemoveReplacedVersion(ctx, version) }
				}
			}
			out = append(out, e)
			published[p.JobID] = true
		}
		for _, fr := range t.runs {
			j := fr.job
			if published[j.ID] {
				continue
			}
			r := base
			r.Partition, r.Table, r.JobID, r.ManifestDigest = j.Partition, fr.version, j.ID, j.ManifestDigest
			if r.Status = unpublishedStatus(j, fr.staged); r.Status != "" {
				e := partitionEntry{run: r}
				if v, ok := fr.sink.(versionRemover); ok && r.Status != "running" {
					e.remove = func(ctx context.Context) error { _, err := v.RemoveStagedVersion(ctx); return err }
				}
				out = append(out, e)
			}
		}
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].run.Partition != out[b].run.Partition {
			return out[a].run.Partition < out[b].run.Partition
		}
		return out[a].run.Target < out[b].run.Target
	})
	return out, nil
}

// unpublishedStatus is the status of partition run j, which no publication
// log entry names, given whether its staging table or version directory
// is there: "running", "shadow", "staged", or "" when nothing is left of
// it (a rerun of a published manifest, or a run that wrote nothing).
func unpublishedStatus(j *record.Job, staged bool) string {
	switch {
	case j.Active() || j.PendingCommit && !j.Shadow:
		return "running"
	case staged && j.Shadow:
		return "shadow"
	case staged:
		return "staged"
	}
	return ""
}

// prunable says whether weir partitions prune removes entries of status
// st: staged and shadow ones (both by default) and, when asked for,
// replaced ones (a file sink's published versions a later publication of
// their partition replaced); never the version a partition reads or a
// running entry.
func prunable(st string) bool { return st == "staged" || st == "shadow" || st == statusReplaced }

// statusReplaced is prune's name for a replaced published file version:
// weir partitions list shows it published (the log's entry), prune
// removes its directory only when asked for it.
const statusReplaced = "replaced"

// status is e's status as prune matches and reports it.
func (e partitionEntry) status() string {
	if e.replaced {
		return statusReplaced
	}
	return e.run.Status
}

// Prune removes what job name's partition runs left without publishing:
// the staging tables (dropped) and version directories (removed) that
// Partitions shows as staged or shadow, of partition (every partition
// when empty), of the statuses given (staged and shadow when none); with
// status replaced, also the directories of file versions a later
// publication of their partition replaced (the log keeps their entries,
// marked pruned). It never touches the version a partition reads or a
// running entry. It returns the entries removed (a replaced one with
// status replaced), or with dryRun those it would remove, removing
// nothing. JOB_NOT_FOUND when no job has the name, INVALID_REQUEST for a
// status other than staged, shadow or replaced, SINK_UNAVAILABLE when a
// removal fails (the entries removed before it are gone).
func (s *Tables) Prune(ctx context.Context, name, partition string, statuses []string, dryRun bool) ([]record.PartitionRun, error) {
	want := map[string]bool{}
	for _, st := range statuses {
		if !prunable(st) {
			return nil, errcode.Errorf(errcode.InvalidRequest, "cannot prune status %q: only staged, shadow and replaced entries are pruned (the version a partition reads and running runs never are)", st)
		}
		want[st] = true
	}
	if len(want) == 0 {
		want["staged"], want["shadow"] = true, true
	}
	entries, err := s.partitions(ctx, name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, tableTimeout)
	defer cancel()
	out := []record.PartitionRun{}
	for _, e := range entries {
		st := e.status()
		if !want[st] || partition != "" && e.run.Partition != partition {
			continue
		}
		if e.remove == nil {
			return out, errcode.Errorf(errcode.SinkUnavailable, "cannot remove the %s %s of partition %s (job %s): its sink cannot remove it",
				st, e.run.Table, e.run.Partition, e.run.JobID)
		}
		if !dryRun {
			if err := e.remove(ctx); err != nil {
				return out, errcode.Errorf(errcode.SinkUnavailable, "removing the %s %s of partition %s (job %s), after removing %d entries: %w",
					st, e.run.Table, e.run.Partition, e.run.JobID, len(out), err)
			}
		}
		r := e.run
		r.Status = st
		out = append(out, r)
	}
	return out, nil
}
