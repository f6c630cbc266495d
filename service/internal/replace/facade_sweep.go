package replace

// The façade sweep: compaction of a façade view's old generations that no
// flow's driver will do any more.
//
// A parallel replacement's driver compacts the old generation after the
// cut-over once the rollback retention has passed (compactTables). A later
// flow of the name can take the new job's record over before that — a
// rollback during the compaction wait, another replacement — and the
// driver then stops (errFlowGone): the view would serve the old
// generations, and their tables stay, forever. So the cut-over records
// each of the flow's tables as a sweep entry (facadeSweepKey), in the same
// store write, and the service's expiry loop sweeps them: every
// generation behind the view older than the oldest live job of the
// entry's names is marked ended, those that ended the retention ago are
// merged into the newest generation, and the entry is deleted once one
// generation is left and no live job of the names could still join the
// view with a newer one (or create it: a flow can cut over before the new
// job's first commit made the table a view). Entries are in the store, so a restarted server
// goes on with them; each step is idempotent (a crash repeats it).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/state"
)

// facadeSweepPrefix is the registry prefix of façade sweep entries.
const facadeSweepPrefix = "facade-sweep/"

// facadeRecheck is how long the sweep waits before looking again at an
// entry whose generations are not all compacted yet (the rollback
// retention bounds it when shorter).
const facadeRecheck = time.Minute

// facadeSweepKey is the registry key of table t's sweep entry.
func facadeSweepKey(t record.FacadeTable) string {
	h := sha256.Sum256([]byte(t.Driver + "\x00" + t.DSN + "\x00" + t.Table))
	return facadeSweepPrefix + hex.EncodeToString(h[:12])
}

// facadeSweep is a façade view whose old generations wait to be compacted.
type facadeSweep struct {
	// Table is the view.
	Table record.FacadeTable `json:"table"`
	// Names are the job names whose generations are behind the view (a
	// replacement's old and new names).
	Names []string `json:"names"`
	// CheckAfter is when the sweep looks at the view next.
	CheckAfter time.Time `json:"check_after"`
}

// putFacadeSweeps adds to w a sweep entry for each table of a parallel
// flow between jobs of names, due at once.
func (s *Replace) PutFacadeSweeps(w *state.Write, tables []record.FacadeTable, names ...string) error {
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	for _, t := range tables {
		e := facadeSweep{Table: t, Names: names, CheckAfter: s.Now()}
		if err := core.PutJSON(w, facadeSweepKey(t), e); err != nil {
			return err
		}
	}
	return nil
}

// sweepFacades runs the façade sweep once over the entries that are due.
// It takes the registry lock only for its writes.
func (s *Replace) SweepFacades(ctx context.Context) error {
	var due []facadeSweep
	now := s.Now()
	err := s.Store.Scan(facadeSweepPrefix, func(_ string, v []byte) error {
		var e facadeSweep
		if err := json.Unmarshal(v, &e); err != nil {
			return errcode.Internalf("decoding a façade sweep entry: %w", err)
		}
		if !now.Before(e.CheckAfter) {
			due = append(due, e)
		}
		return nil
	})
	if err != nil || len(due) == 0 {
		return err
	}
	jobs, err := s.jobsNamed(due)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range due {
		if err := s.sweepFacade(ctx, e, jobs, now); err != nil {
			errs = append(errs, fmt.Errorf("façade %s: %w", e.Table.Table, err))
		}
	}
	return errors.Join(errs...)
}

// jobsNamed returns the jobs of the entries' names.
func (s *Replace) jobsNamed(entries []facadeSweep) ([]*record.Job, error) {
	names := map[string]bool{}
	for _, e := range entries {
		for _, n := range e.Names {
			names[n] = true
		}
	}
	var out []*record.Job
	err := s.Store.Scan("job/", func(k string, v []byte) error {
		var j record.Job
		if err := json.Unmarshal(v, &j); err != nil {
			return errcode.Internalf("decoding the record %s: %w", k, err)
		}
		if names[j.Name] {
			out = append(out, &j)
		}
		return nil
	})
	return out, err
}

// mayWrite reports whether job j may still write its tables: it has not
// ended, its final commit is not confirmed, or the service still holds
// its execution.
func (s *Replace) mayWrite(j *record.Job) bool {
	return !j.State.Terminal() || j.PendingCommit || s.RunningJob(j.ID) != nil
}

// sweepFacade is one entry's sweep (see the top of the file), begun at
// now: the next look is due from now on, so that a clock that moved
// during the sweep does not postpone it.
func (s *Replace) sweepFacade(ctx context.Context, e facadeSweep, jobs []*record.Job, now time.Time) error {
	target := s.FacadeTarget(e.Table)
	gens, err := s.sql.FacadeGenerations(ctx, target)
	if err != nil {
		return err
	}
	oldestLive, newestLive := int64(math.MaxInt64), int64(-1)
	for _, j := range jobs {
		if slices.Contains(e.Names, j.Name) && s.mayWrite(j) {
			oldestLive, newestLive = min(oldestLive, j.Generation), max(newestLive, j.Generation)
		}
	}
	// When the jobs of the generations up to g ended: the retention counts
	// from the last of them.
	endedBy := func(g int64) time.Time {
		var t time.Time
		for _, j := range jobs {
			if slices.Contains(e.Names, j.Name) && j.Generation <= g && j.StateTime.After(t) {
				t = j.StateTime
			}
		}
		if t.IsZero() {
			t = now
		}
		return t
	}
	// Done once one generation is left (none: while a job may still make
	// the table a view, as the new job of a flow that cut over before its
	// first commit does) and no live job could join with a newer one.
	done := func() bool {
		if len(gens) == 0 {
			return newestLive < 0
		}
		return len(gens) == 1 && newestLive <= gens[0].Generation
	}
	if !done() && len(gens) > 1 {
		keep := gens[0].Generation
		if upTo := min(keep, oldestLive) - 1; upTo >= gens[len(gens)-1].Generation {
			at := endedBy(upTo)
			if err := s.sql.EndFacadeGeneration(ctx, target, upTo, at); err != nil && !errors.Is(err, contract.ErrFacade) {
				return fmt.Errorf("recording the end of the generations up to %d: %w", upTo, err)
			}
		}
		rep, err := s.sql.CompactFacade(ctx, target, keep, s.Opts.RollbackRetention)
		if err != nil {
			return fmt.Errorf("compacting into generation %d: %w", keep, err)
		}
		if len(rep.Merged) > 0 {
			s.Opts.Logger.Info("façade sweep: old generations compacted", "table", e.Table.Table, "kept", keep, "merged", rep.Merged, "rows", rep.Rows, "waiting", rep.Waiting)
		}
		if gens, err = s.sql.FacadeGenerations(ctx, target); err != nil {
			return err
		}
	}
	return s.Update(func(tx *core.Tx) error {
		w := &state.Write{}
		if done() {
			w.Delete(facadeSweepKey(e.Table))
			s.Opts.Logger.Info("façade sweep: done", "table", e.Table.Table, "generations", len(gens))
		} else {
			e.CheckAfter = now.Add(min(facadeRecheck, max(s.Opts.RollbackRetention, time.Second)))
			if err := core.PutJSON(w, facadeSweepKey(e.Table), e); err != nil {
				return err
			}
		}
		return tx.Apply(w)
	})
}

// facadeSweeps returns the sweep entries.
func (s *Replace) FacadeSweeps() ([]facadeSweep, error) {
	var out []facadeSweep
	err := s.Store.Scan(facadeSweepPrefix, func(_ string, v []byte) error {
		var e facadeSweep
		if err := json.Unmarshal(v, &e); err != nil {
			return errcode.Internalf("decoding a façade sweep entry: %w", err)
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// subscriptionSweepEvery is how many façade sweeps (checkpoint
// intervals) pass between two subscription sweeps: the subscription sweep
// reads every job record.
const subscriptionSweepEvery = 10

// sweepLoop runs the façade sweep every checkpoint interval, and the
// subscription sweep (subscription_sweep.go) every subscriptionSweepEvery
// of them, until the service closes. It runs in a goroutine Close waits
// for (Spawn).
func (s *Replace) sweepLoop() {
	t := time.NewTicker(s.Opts.CheckpointInterval)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-s.Ctx.Done():
			return
		case <-t.C:
			if s.StoreFailed() != nil {
				continue
			}
			if err := s.SweepFacades(s.Ctx); err != nil && s.Ctx.Err() == nil {
				s.Opts.Logger.Error("compacting façade views (retried)", "error", err)
			}
			if n%subscriptionSweepEvery != 0 {
				continue
			}
			if _, err := s.SweepSubscriptions(s.Ctx); err != nil && s.Ctx.Err() == nil {
				s.Opts.Logger.Error("deleting subscriptions no job can use any more (retried)", "error", err)
			}
		}
	}
}
