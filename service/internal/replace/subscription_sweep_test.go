package replace

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/service/record"
)

// graphOf returns a graph whose source steps read what sources say:
// step → "topic/T" or "subscription/S".
func graphOf(t *testing.T, sources map[string]string) json.RawMessage {
	t.Helper()
	p := graph.Pipeline{FormatVersion: graph.FormatVersion}
	for step, id := range sources {
		p.Steps = append(p.Steps, &graph.Step{Name: step, Kind: graph.KindSource, Source: &graph.IOIdentity{Kind: "pubsub", Identity: id}})
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSubscriptionUses: who made each service-made subscription, who
// reads it and why it is kept, step by step of a name's life: a running
// job, its end within and after the retention, a successor that does not
// read it, a parallel flow under way, a rollback snapshot, and a user's
// named subscription (never listed).
func TestSubscriptionUses(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	const retention = time.Hour
	topic := graphOf(t, map[string]string{"Events": "topic/events"})
	named := graphOf(t, map[string]string{"Events": "subscription/mine"})
	dropped := graphOf(t, map[string]string{"Other": "topic/other"})
	job := func(id, name string, st record.JobState, end time.Time, g json.RawMessage) *record.Job {
		return &record.Job{ID: id, Name: name, State: st, CreateTime: end.Add(-time.Minute), StateTime: end, Graph: g}
	}
	running := job("j1", "sums", record.StateRunning, t0, topic)
	cancelled := job("j1", "sums", record.StateCancelled, t0, topic)
	successor := job("j2", "sums", record.StateRunning, t0.Add(time.Minute), dropped)
	parOld := job("j1", "sums", record.StateRunning, t0, topic)
	parNew := job("j2", "sums", record.StateRunning, t0.Add(time.Minute), topic)
	parNew.Subscriptions = map[string]string{"Events": "sums--g2--Events"}
	parNew.Replacement = &record.Replacement{Phase: record.PhaseOverlap, Parallel: &record.ParallelFlow{
		Subscriptions: []record.ParallelSubscription{{Step: "Events", Topic: "events", Old: "sums--Events", New: "sums--g2--Events"}}}}
	rolledBack := job("j2", "sums", record.StateDrained, t0.Add(2*time.Minute), topic)
	rolledBack.Subscriptions = parNew.Subscriptions
	rollbackJob := job("j3", "sums", record.StateRunning, t0.Add(3*time.Minute), topic)
	rbSnap := &record.Snapshot{ID: "s1", JobName: "sums", Generation: 1, Kind: record.SnapshotKindRollback, State: record.SnapshotReady,
		ExpireTime: t0.Add(24 * time.Hour), Graph: topic}
	user := job("u1", "reader", record.StateCancelled, t0, named)

	cases := []struct {
		name      string
		jobs      []*record.Job
		latest    map[string]*record.Job
		rollbacks []*record.Snapshot
		now       time.Time
		// want: subscription → "" (listed, kept for nothing) or a part of
		// why it is kept; absent: not listed.
		want map[string]string
	}{
		{"running", []*record.Job{running}, map[string]*record.Job{"sums": running}, nil, t0,
			map[string]string{"sums--Events": "read by j1 (sums, RUNNING)"}},
		{"ended, within the retention", []*record.Job{cancelled}, map[string]*record.Job{"sums": cancelled}, nil, t0.Add(time.Minute),
			map[string]string{"sums--Events": "the next job of sums reads on"}},
		{"ended, after the retention", []*record.Job{cancelled}, map[string]*record.Job{"sums": cancelled}, nil, t0.Add(retention + time.Second),
			map[string]string{"sums--Events": ""}},
		{"a successor that reads it no more", []*record.Job{cancelled, successor}, map[string]*record.Job{"sums": successor}, nil, t0.Add(time.Minute),
			map[string]string{"sums--Events": "", "sums--Other": "read by j2"}},
		{"a rollback could re-read through it", []*record.Job{cancelled, successor}, map[string]*record.Job{"sums": successor}, []*record.Snapshot{rbSnap}, t0.Add(2 * retention),
			map[string]string{"sums--Events": "a rollback of sums to generation 1 (rollback snapshot s1)", "sums--Other": "read by j2"}},
		{"a parallel flow under way", []*record.Job{parOld, parNew}, map[string]*record.Job{"sums": parNew}, nil, t0.Add(time.Minute),
			map[string]string{"sums--Events": "read by j1", "sums--g2--Events": "read by j2"}},
		{"a parallel job a rollback drained", []*record.Job{cancelled, rolledBack, rollbackJob}, map[string]*record.Job{"sums": rollbackJob}, []*record.Snapshot{rbSnap}, t0.Add(4 * time.Minute),
			map[string]string{"sums--Events": "read by j3", "sums--g2--Events": ""}},
		{"a user's named subscription", []*record.Job{user}, map[string]*record.Job{"reader": user}, nil, t0,
			map[string]string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := subscriptionUses(c.jobs, c.latest, c.rollbacks, c.now, retention)
			if len(got) != len(c.want) {
				t.Errorf("listed %d subscriptions, want %d: %v", len(got), len(c.want), keys(got))
			}
			for sub, why := range c.want {
				u, ok := got[sub]
				switch {
				case !ok:
					t.Errorf("%s is not listed", sub)
				case why == "" && u.Kept != "":
					t.Errorf("%s is kept (%s), want kept for nothing", sub, u.Kept)
				case why != "" && !strings.Contains(u.Kept, why):
					t.Errorf("%s is kept %q, want %q", sub, u.Kept, why)
				}
			}
		})
	}
}

func keys(m map[string]*subUse) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
