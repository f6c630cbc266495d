package service

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service/record"
)

// TestJobEventsOfABatchJob: a batch job's transitions and its dead letter
// are its events, in order, each transition with its reason — even when
// the execution rejected the element before the job was recorded RUNNING.
func TestJobEventsOfABatchJob(t *testing.T) {
	t.Parallel()
	s := openServiceHooks(t, t.TempDir(), Hooks{Started: func(jr *Run) { <-jr.X.Done() }})
	const failing = `pipeline:
  transforms:
    - type: Create
      name: Transactions
      config:
        elements: [{region: NORTH, amount: 250}, {region: UNKNOWN, amount: 50}]
    - type: Validate
      name: CheckRegion
      input: Transactions
      config:
        rules:
          known_region: region in ["NORTH", "WEST"]
`
	j := submit(t, s, "failing", failing, t.TempDir())
	waitState(t, s, j.ID, record.StateDone)
	waitLetGo(t, s, j.ID)
	_, evs, err := s.Events("failing", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		switch ev.Type {
		case record.EventStateChanged:
			got = append(got, ev.Details["to"].(string))
		case record.EventDeadLetter:
			got = append(got, "dead letter "+ev.Details["step"].(string))
			if ev.Severity != record.SeverityWarning {
				t.Errorf("dead letter severity %s", ev.Severity)
			}
		default:
			got = append(got, string(ev.Type))
		}
	}
	if want := []string{"PENDING", "RUNNING", "dead letter CheckRegion", "DONE"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if last := evs[len(evs)-1]; last.Message != "job moved from RUNNING to DONE: execution completed" {
		t.Errorf("last event %+v", last)
	}
}

// TestEventTypesDocumented: EventTypes lists every type the service emits.
func TestEventTypesDocumented(t *testing.T) {
	t.Parallel()
	all := map[record.EventType]bool{}
	for _, e := range record.EventTypes() {
		if all[e.Type] || e.Meaning == "" {
			t.Errorf("event type %s listed twice or without a meaning", e.Type)
		}
		all[e.Type] = true
	}
	for _, typ := range []record.EventType{record.EventStateChanged, record.EventConditionChanged, record.EventCheckpointFailed, record.EventDeadLetter, record.EventUpdateRefused,
		record.EventUpdateValidated, record.EventUpdateSucceeded, record.EventUpdateFailed, record.EventRescaleSucceeded, record.EventRescaleFailed, record.EventReplacementPhase, record.EventParityGate,
		record.EventSnapshotCreated, record.EventSnapshotFailed, record.EventRecovered, record.EventCatchUpExpired, record.EventLog, record.EventTableMerged} {
		if !all[typ] {
			t.Errorf("EventTypes lacks %s", typ)
		}
	}
}

// eventTypes returns the types of job id's events, oldest first.
func eventTypes(t *testing.T, s *Service, id string) []record.EventType {
	t.Helper()
	evs, err := s.core.ReadEvents(id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []record.EventType
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

// eventsOf returns the events of type typ of job ref, oldest first.
func eventsOf(t *testing.T, s *Service, ref string, typ record.EventType) []record.Event {
	t.Helper()
	_, evs, err := s.Events(ref, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []record.Event
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// TestUpdateAndSnapshotEvents: a refused, a validate-only and an in-place
// update, and a snapshot, are events of the jobs they concern.
func TestUpdateAndSnapshotEvents(t *testing.T) {
	t.Parallel()
	s := openService(t, t.TempDir())
	base := t.TempDir()
	old := submitCheckpointed(t, s, base)
	ctx := context.Background()
	renamed := strings.Replace(strings.Replace(streamingYAML, "name: Sums", "name: Totals", 1), "input: Sums", "input: Totals", 1)
	if _, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: renamed, BaseDir: base}}); errcode.Of(err) != errcode.IncompatibleUpdate {
		t.Fatalf("renaming without a mapping: %v", err)
	}
	if _, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: streamingYAML, BaseDir: base}, ValidateOnly: true}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: streamingYAML, BaseDir: base}})
	if err != nil {
		t.Fatal(err)
	}
	nj := res.Job
	got := eventTypes(t, s, old.ID)
	want := []record.EventType{record.EventStateChanged, record.EventStateChanged, record.EventUpdateRefused, record.EventUpdateValidated, record.EventStateChanged, record.EventUpdateSucceeded}
	if !slices.Equal(got, want) {
		t.Errorf("old job's events %v, want %v", got, want)
	}
	evs, _ := s.core.ReadEvents(old.ID, 0, 0)
	if d := evs[2].Details; d["problems"].(float64) < 1 || d["errors"] == nil {
		t.Errorf("refused update's details %v", d)
	}
	snap, err := s.CreateSnapshot(ctx, SnapshotRequest{Job: "sums"})
	if err != nil {
		t.Fatal(err)
	}
	if snap, err = s.WaitSnapshot(ctx, snap.ID); err != nil || snap.State != record.SnapshotReady {
		t.Fatalf("snapshot %+v, %v", snap, err)
	}
	got = eventTypes(t, s, nj.ID)
	want = []record.EventType{record.EventStateChanged, record.EventUpdateSucceeded, record.EventSnapshotCreated}
	if !slices.Equal(got, want) {
		t.Errorf("new job's events %v, want %v", got, want)
	}
	if _, err := s.Cancel(ctx, "sums"); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, nj.ID, record.StateCancelled)
}

// TestDeadLetterOfAnAggregate: a sink's reject of a window's aggregate,
// which no one source position produced, is described by its step and
// reason, without a position.
func TestDeadLetterOfAnAggregate(t *testing.T) {
	t.Parallel()
	s := openService(t, t.TempDir())
	const keyless = `pipeline:
  transforms:
    - type: Create
      name: Orders
      config:
        elements: [{region: NORTH, amount: 250}, {amount: 50}]
    - type: Combine
      name: Totals
      input: Orders
      config:
        group_by: [region]
        combine:
          total: {value: amount, fn: sum}
    - type: WriteToSql
      name: Write
      input: Totals
      config: {dsn: totals.sqlite, table: totals, key: [region]}
`
	j := submit(t, s, "keyless", keyless, t.TempDir())
	waitState(t, s, j.ID, record.StateDone)
	waitLetGo(t, s, j.ID)
	dead := eventsOf(t, s, "keyless", record.EventDeadLetter)
	if len(dead) != 1 {
		t.Fatalf("dead letter events %+v, want one", dead)
	}
	ev := dead[0]
	if want := `element rejected by a step without error_handling: step "Write": null_key: `; !strings.HasPrefix(ev.Message, want) {
		t.Errorf("dead letter %q, want it to start %q", ev.Message, want)
	}
	if _, ok := ev.Details["source"]; ok || ev.Details["reason"] != "null_key" {
		t.Errorf("dead letter details %v: want reason null_key and no source", ev.Details)
	}
}
