package replace

// The subscriptions the service made for jobs — a topic source's
// "<job name>--<step>", a parallel replacement's own — end with the last
// job that can still use them: they are kept while an active job reads
// them, while the name's next job would read on from them (for the
// rollback retention after the last reader ended: a job run again under
// the name, or a rollback, goes on where the ended one stopped), and while
// a rollback snapshot of the name could start a job that re-reads through
// them; then the sweep deletes them, so their backlog stops growing.
// Subscriptions the user made (a `subscription: S` source's S) are never
// touched.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/state"
	"github.com/weir-dev/weir/yamlpipe"
)

// SubscriptionUse says who made a service-made subscription, who reads it
// and why it is kept.
type SubscriptionUse struct {
	Subscription string `json:"subscription"`
	// MadeBy is the first job that read it (the service made it for that
	// job), Step the step.
	MadeBy record.Summary `json:"made_by"`
	Step   string         `json:"step"`
	// ReadBy are the active jobs that read it.
	ReadBy []record.Summary `json:"read_by,omitempty"`
	// Kept says why it is kept; "" when nothing can use it any more (the
	// sweep deletes it).
	Kept string `json:"kept,omitempty"`
	// KeepUntil is when it stops being kept, when that is known (no
	// active job reads it).
	KeepUntil *time.Time `json:"keep_until,omitempty"`
}

// subUse is what the sweep gathers of one subscription.
type subUse struct {
	SubscriptionUse
	// names are the job names whose jobs read it.
	names   map[string]bool
	lastEnd time.Time
	// ended are the ended jobs that read it.
	ended []string
	// inFlow: an active replacement flow names it.
	inFlow string
}

// jobSubscriptions returns the service-made subscriptions job j reads, by
// step: a topic source's (its own, or the one a replacement gave the step)
// and a named source's replacement (job.subscriptions); a named source
// reading the user's subscription is left out.
func jobSubscriptions(j *record.Job) map[string]string {
	out := map[string]string{}
	g, err := graph.Parse(j.Graph)
	if err != nil {
		return out
	}
	for _, st := range g.Steps {
		src := st.Source
		if st.Kind != graph.KindSource || src == nil || src.Kind != core.PubSubSourceKind {
			continue
		}
		kind, _, _ := strings.Cut(src.Identity, "/")
		switch {
		case j.Subscriptions[st.Name] != "":
			out[st.Name] = j.Subscriptions[st.Name]
		case kind == "topic":
			out[st.Name] = yamlpipe.TopicSubscription(j.Name, st.Name)
		}
	}
	return out
}

// subscriptionUses computes, from every job, every job name's latest job
// and the READY rollback snapshots, who made each service-made
// subscription, who reads it and why it is kept at now. It takes no lock.
func subscriptionUses(jobs []*record.Job, latest map[string]*record.Job, rollbacks []*record.Snapshot, now time.Time, retention time.Duration) map[string]*subUse {
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].CreateTime.Before(jobs[b].CreateTime) })
	uses := map[string]*subUse{}
	for _, j := range jobs {
		for step, sub := range jobSubscriptions(j) {
			u := uses[sub]
			if u == nil {
				u = &subUse{SubscriptionUse: SubscriptionUse{Subscription: sub, MadeBy: j.Summary(), Step: step}, names: map[string]bool{}}
				uses[sub] = u
			}
			u.names[j.Name] = true
			if j.Active() {
				u.ReadBy = append(u.ReadBy, j.Summary())
			} else {
				u.ended = append(u.ended, j.ID)
				if j.StateTime.After(u.lastEnd) {
					u.lastEnd = j.StateTime
				}
			}
		}
		if rep := j.Replacement; rep != nil && rep.Parallel != nil && j.Active() && !rep.Phase.Final() {
			for _, ps := range rep.Parallel.Subscriptions {
				for _, sub := range []string{ps.Old, ps.New} {
					if u := uses[sub]; u != nil {
						u.inFlow = j.ID
					}
				}
			}
		}
	}
	for _, u := range uses {
		switch {
		case len(u.ReadBy) > 0:
			var names []string
			for _, r := range u.ReadBy {
				names = append(names, fmt.Sprintf("%s (%s, %s)", r.ID, r.Name, r.State))
			}
			u.Kept = "read by " + strings.Join(names, ", ")
			continue
		case u.inFlow != "":
			u.Kept = "in use by the replacement flow of job " + u.inFlow
			continue
		}
		for name := range u.names {
			l := latest[name]
			if l == nil {
				continue
			}
			for _, sub := range jobSubscriptions(l) {
				if sub != u.Subscription {
					continue
				}
				until := u.lastEnd.Add(retention)
				if now.Before(until) && (u.KeepUntil == nil || until.After(*u.KeepUntil)) {
					u.Kept = fmt.Sprintf("the next job of %s reads on from it, for the rollback retention after its last reader (%s) ended", name, l.ID)
					u.KeepUntil = &until
				}
			}
		}
		for _, snap := range rollbacks {
			if !u.names[snap.JobName] || !now.Before(snap.ExpireTime) {
				continue
			}
			g, err := graph.Parse(snap.Graph)
			if err != nil {
				continue
			}
			for _, st := range g.Steps {
				src := st.Source
				if st.Kind != graph.KindSource || src == nil || src.Kind != core.PubSubSourceKind || !strings.HasPrefix(src.Identity, "topic/") ||
					yamlpipe.TopicSubscription(snap.JobName, st.Name) != u.Subscription {
					continue
				}
				if u.KeepUntil == nil || snap.ExpireTime.After(*u.KeepUntil) {
					until := snap.ExpireTime
					u.Kept = fmt.Sprintf("a rollback of %s to generation %d (rollback snapshot %s) would re-read through it", snap.JobName, snap.Generation, snap.ID)
					u.KeepUntil = &until
				}
			}
		}
	}
	return uses
}

// subscriptionGoneKey records that the sweep deleted sub after the jobs
// that read it had ended: a later job that reads it again, and ends,
// makes it a candidate again.
func subscriptionGoneKey(sub string) string { return "subgone/" + sub }

type subscriptionGone struct {
	Deleted time.Time `json:"deleted"`
}

// gatherSubscriptionUses reads what subscriptionUses needs. It takes no
// lock.
func (s *Replace) gatherSubscriptionUses() (map[string]*subUse, error) {
	jobs, err := s.List(core.StatusAll)
	if err != nil {
		return nil, err
	}
	latest := map[string]*record.Job{}
	byID := map[string]*record.Job{}
	for _, j := range jobs {
		byID[j.ID] = j
	}
	for _, j := range jobs {
		if _, ok := latest[j.Name]; ok {
			continue
		}
		l, err := s.ReadLineage(j.Name)
		if err != nil {
			continue
		}
		latest[j.Name] = byID[l.LatestJobID]
	}
	snaps, err := s.snaps.ListSnapshots("", false)
	if err != nil {
		return nil, err
	}
	var rollbacks []*record.Snapshot
	for _, snap := range snaps {
		if snap.Kind == record.SnapshotKindRollback && snap.State == record.SnapshotReady {
			rollbacks = append(rollbacks, snap)
		}
	}
	return subscriptionUses(jobs, latest, rollbacks, s.Now(), s.Opts.RollbackRetention), nil
}

// SubscriptionUses returns who made each service-made subscription, who
// reads it and why it is kept, by subscription name; subscriptions the
// sweep deleted are left out. It takes no lock.
func (s *Replace) SubscriptionUses() (map[string]SubscriptionUse, error) {
	uses, err := s.gatherSubscriptionUses()
	if err != nil {
		return nil, err
	}
	out := map[string]SubscriptionUse{}
	for sub, u := range uses {
		if gone, ok := s.readGone(sub); ok && !u.lastEnd.After(gone.Deleted) && len(u.ReadBy) == 0 {
			continue
		}
		out[sub] = u.SubscriptionUse
	}
	return out, nil
}

func (s *Replace) readGone(sub string) (subscriptionGone, bool) {
	var g subscriptionGone
	b, err := s.Store.Get(subscriptionGoneKey(sub))
	if err != nil {
		return g, false
	}
	return g, core.DecodeJSON(b, &g) == nil
}

// subscriptionDeleter is what the sweep needs of the broker.
type subscriptionDeleter interface {
	DeleteSubscription(ctx context.Context, name string) error
}

// SweepSubscriptions deletes the service-made subscriptions nothing can
// use any more (subscriptionUses): for each, under the guard of every job
// name that read it (lock order 1, one at a time, in name order; nothing
// else is held), it checks again that no job of the name reads it or
// would read on from it, deletes it from the broker (one already gone is
// no error) and records the deletion. It returns the subscriptions it
// deleted.
func (s *Replace) SweepSubscriptions(ctx context.Context) ([]string, error) {
	b, ok := s.Opts.Broker.(subscriptionDeleter)
	if !ok {
		return nil, nil
	}
	uses, err := s.gatherSubscriptionUses()
	if err != nil {
		return nil, err
	}
	var subs []string
	for sub, u := range uses {
		if u.Kept != "" || len(u.ReadBy) > 0 {
			continue
		}
		if gone, ok := s.readGone(sub); ok && !u.lastEnd.After(gone.Deleted) {
			continue
		}
		subs = append(subs, sub)
	}
	sort.Strings(subs)
	var deleted []string
	var errs []error
	for _, sub := range subs {
		ok, err := s.sweepSubscription(ctx, b, sub, uses[sub].names)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			deleted = append(deleted, sub)
		}
	}
	return deleted, errors.Join(errs...)
}

// sweepSubscription deletes sub once more checked under the guards of
// names (every job name whose jobs read it).
func (s *Replace) sweepSubscription(ctx context.Context, b subscriptionDeleter, sub string, names map[string]bool) (bool, error) {
	var sorted []string
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var unlocks []func()
	defer func() {
		for _, u := range unlocks {
			u()
		}
	}()
	for i, n := range sorted {
		// Lock order 1, for each name in turn. A flow under two names
		// (a replacement under a new name) may hold one and wait for the
		// other: for every name but the first the sweep waits a bounded
		// time and otherwise gives the subscription up until its next round.
		lctx := ctx
		if i > 0 {
			var cancel context.CancelFunc
			lctx, cancel = context.WithTimeout(ctx, time.Second)
			defer cancel()
		}
		unlock, err := s.LockName(lctx, n)
		if err != nil {
			if i > 0 && ctx.Err() == nil {
				return false, nil
			}
			return false, err
		}
		unlocks = append(unlocks, unlock)
	}
	uses, err := s.gatherSubscriptionUses()
	if err != nil {
		return false, err
	}
	u := uses[sub]
	if u == nil || u.Kept != "" || len(u.ReadBy) > 0 {
		return false, nil
	}
	for _, id := range u.ended {
		if s.RunningJob(id) != nil {
			return false, nil // ended, its execution not yet let go
		}
	}
	err = b.DeleteSubscription(ctx, sub)
	if err != nil && !errors.Is(err, contract.ErrSubscriptionNotFound) {
		return false, fmt.Errorf("deleting subscription %s, which no job can use any more: %w", sub, err)
	}
	w := &state.Write{}
	if err := core.PutJSON(w, subscriptionGoneKey(sub), subscriptionGone{Deleted: s.Now()}); err != nil {
		return false, err
	}
	if err := s.Apply(w); err != nil {
		return false, errcode.Internalf("recording the deletion of subscription %s: %w", sub, err)
	}
	s.Opts.Logger.Info("subscription deleted: no job can use it any more", "subscription", sub, "made_by_job_id", u.MadeBy.ID, "job_name", u.MadeBy.Name)
	return true, nil
}
