package service

import (
	"sort"
	"strings"
	"time"

	"github.com/weir-dev/weir/service/record"
)

// How a generation took over from the one before (GenerationHistory.How).
const (
	HowCreate             = "create"
	HowCreateFromSnapshot = "create_from_snapshot"
	HowInPlaceUpdate      = "in_place_update"
	HowStopAndReplace     = record.StrategyStopAndReplace
	HowParallel           = record.StrategyParallel
	HowRollback           = record.StrategyRollback
)

// PhaseTime is one phase of a replacement flow and when it began.
type PhaseTime struct {
	Phase record.ReplacementPhase `json:"phase"`
	Time  time.Time               `json:"time"`
}

// RollbackPoint is a rollback snapshot kept of a generation's job.
type RollbackPoint struct {
	SnapshotID string               `json:"snapshot_id"`
	State      record.SnapshotState `json:"state"`
	CreateTime time.Time            `json:"creation_time"`
	ExpireTime time.Time            `json:"expire_time"`
	// ReplacedByJobID is the job whose start the snapshot was kept for.
	ReplacedByJobID string `json:"replaced_by_job_id,omitempty"`
}

// GenerationHistory is one job of a name in `weir jobs history`: how it
// replaced the job before it, its phases, its stop window, its rescales,
// the rollback snapshots kept of it and, for a rollback, what it went back to.
type GenerationHistory struct {
	Generation int64           `json:"generation"`
	JobID      string          `json:"job_id"`
	State      record.JobState `json:"state"`
	CreateTime time.Time       `json:"create_time"`
	StateTime  time.Time       `json:"state_time"`
	// How is HowCreate, HowCreateFromSnapshot, HowInPlaceUpdate,
	// HowStopAndReplace, HowParallel or HowRollback.
	How             string `json:"how"`
	ReplacesJobID   string `json:"replaces_job_id,omitempty"`
	ReplacedByJobID string `json:"replaced_by_job_id,omitempty"`
	// FromSnapshotID is the snapshot the job started from.
	FromSnapshotID string `json:"from_snapshot_id,omitempty"`
	// RolledBackToGeneration is, for a rollback, the generation whose
	// pipeline and state it runs again.
	RolledBackToGeneration int64 `json:"rolled_back_to_generation,omitempty"`
	// Phases of the replacement flow that created the job, in order.
	Phases           []PhaseTime `json:"phases,omitempty"`
	StopWindowMillis *int64      `json:"stop_window_ms,omitempty"`
	// ParityGate is the parity gate of the parallel replacement that
	// created the job (weir_cutover_gate=parity): its outcome, figures and
	// report, an aborted gate's included.
	ParityGate *record.ParityGate `json:"parity_gate,omitempty"`
	// Rescales are the job's in-flight rescales.
	Rescales []record.StateChange `json:"rescales,omitempty"`
	// RollbackPoints are the rollback snapshots kept of this job.
	RollbackPoints []RollbackPoint `json:"rollback_points,omitempty"`
	Notes          []string        `json:"notes,omitempty"`
	Error          string          `json:"error,omitempty"`
	// JobName is set on a generation of another name that this name's
	// lineage continues: a replacement under a new name
	// (parallel_replace_job_name/_id) carries the old name's generations
	// on, and the history of the new name shows them, marked by the name.
	JobName string `json:"job_name,omitempty"`
}

// LineageHistory returns every job of name, oldest first, as the history
// of its generations (see GenerationHistory), preceded by the generations
// of other names its lineage continues (GenerationHistory.JobName): when
// the name's first job replaced a job under another name, that name's
// jobs up to the replaced one come first, and so on back. It takes no
// lock.
func (s *Service) LineageHistory(name string) ([]GenerationHistory, error) {
	jobs, _, err := s.core.History(name)
	if err != nil {
		return nil, err
	}
	names := []string{name}
	for seen := map[string]bool{name: true}; len(jobs) > 0 && jobs[0].ReplacesJobID != ""; {
		prev, err := s.core.ReadJob(jobs[0].ReplacesJobID)
		if err != nil || seen[prev.Name] {
			break // deleted, or a loop of names: the history starts here
		}
		seen[prev.Name] = true
		earlier, _, err := s.core.History(prev.Name)
		if err != nil {
			return nil, err
		}
		var kept []*record.Job
		for _, j := range earlier {
			// The old name's jobs up to the replaced one; later jobs of
			// that name are a lineage of their own.
			if j.Generation <= prev.Generation && !j.CreateTime.After(prev.CreateTime) {
				kept = append(kept, j)
			}
		}
		jobs = append(kept, jobs...)
		names = append(names, prev.Name)
	}
	var snaps []*record.Snapshot
	for _, n := range names {
		ns, err := s.snaps.ListSnapshots(n, true)
		if err != nil {
			return nil, err
		}
		snaps = append(snaps, ns...)
	}
	byID := map[string]*record.Job{}
	for _, j := range jobs {
		byID[j.ID] = j
	}
	points := map[string][]RollbackPoint{}
	snapGen := map[string]int64{}
	for _, sn := range snaps {
		snapGen[sn.ID] = sn.Generation
		if sn.Kind != record.SnapshotKindRollback {
			continue
		}
		points[sn.SourceJobID] = append(points[sn.SourceJobID], RollbackPoint{SnapshotID: sn.ID, State: sn.State,
			CreateTime: sn.CreationTime, ExpireTime: sn.ExpireTime, ReplacedByJobID: sn.ReplacedByJobID})
	}
	out := make([]GenerationHistory, 0, len(jobs))
	for _, j := range jobs {
		h := GenerationHistory{Generation: j.Generation, JobID: j.ID, State: j.State, CreateTime: j.CreateTime, StateTime: j.StateTime,
			ReplacesJobID: j.ReplacesJobID, ReplacedByJobID: j.ReplacedByJobID, FromSnapshotID: j.CreatedFromSnapshotID, Error: j.Error}
		if j.Name != name {
			h.JobName = j.Name
		}
		// The flow that created j: the old job's copy of it (j's own is
		// replaced when j is in turn replaced by a flow).
		rep := j.Replacement
		if prev := byID[j.ReplacesJobID]; prev != nil && prev.Replacement != nil && prev.Replacement.NewJobID == j.ID {
			rep = prev.Replacement
		}
		switch {
		case rep != nil && rep.NewJobID == j.ID:
			h.How = rep.Strategy
			h.Phases = replacementPhases(j, rep)
			h.StopWindowMillis = rep.StopWindowMillis
			if rep.Parallel != nil {
				h.ParityGate = rep.Parallel.Gate
			}
			h.Notes = rep.Notes
			if rep.Strategy == record.StrategyRollback {
				h.RolledBackToGeneration = snapGen[j.CreatedFromSnapshotID]
			}
		case j.ReplacesJobID != "":
			h.How = HowInPlaceUpdate
		case j.CreatedFromSnapshotID != "":
			h.How = HowCreateFromSnapshot
		default:
			h.How = HowCreate
		}
		for _, c := range j.History {
			if strings.HasPrefix(c.Reason, "rescaled from") {
				h.Rescales = append(h.Rescales, c)
			}
		}
		h.RollbackPoints = points[j.ID]
		sort.Slice(h.RollbackPoints, func(a, b int) bool { return h.RollbackPoints[a].CreateTime.Before(h.RollbackPoints[b].CreateTime) })
		out = append(out, h)
	}
	return out, nil
}

// replacementPhases reconstructs the phases of the flow that created job
// j from its record: PREPARING at its creation, OVERLAP when a parallel
// replacement's new job started, DRAINING_OLD at the drain request, and
// the phase it is in now since its phase time.
func replacementPhases(j *record.Job, rep *record.Replacement) []PhaseTime {
	ps := []PhaseTime{{Phase: record.PhasePreparing, Time: j.CreateTime}}
	if rep.Parallel != nil && rep.Parallel.OverlapStart != nil {
		ps = append(ps, PhaseTime{Phase: record.PhaseOverlap, Time: *rep.Parallel.OverlapStart})
	}
	if rep.DrainStart != nil {
		ps = append(ps, PhaseTime{Phase: record.PhaseDrainingOld, Time: *rep.DrainStart})
	}
	if rep.Phase != record.PhasePreparing && rep.Phase != record.PhaseDrainingOld {
		ps = append(ps, PhaseTime{Phase: rep.Phase, Time: rep.PhaseTime})
	}
	return ps
}
