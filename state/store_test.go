package state

import (
	"context"
	"errors"
	"testing"

	"github.com/weir-dev/weir/runner/contract"
)

func TestCheckpointRoundTripAndRebind(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	cp := &contract.Checkpoint{Epoch: 3,
		Positions: map[string][][]byte{"Read": {[]byte("p0"), []byte("p1")}},
		SinkParts: map[string][][]byte{"Write": {[]byte("rows")}},
		State: []contract.StateEntry{
			{Step: "Count", KeyGroup: 7, Key: []byte("a"), Value: []byte("1")},
			{Step: "Count", KeyGroup: 7, Key: []byte("b"), Value: []byte("2")},
			{Step: "Count", KeyGroup: 9, Key: []byte("c"), Value: []byte("3")},
			{Step: "Other", KeyGroup: 7, Key: []byte("a"), Value: []byte("x")},
		}}
	var w Write
	w.Put("job/j1", []byte(`{"state":"RUNNING"}`))
	if err := s.WriteCheckpoint("orders", "j1", cp, &w); err != nil {
		t.Fatal(err)
	}
	// A later checkpoint deletes one key and changes another.
	cp2 := &contract.Checkpoint{Epoch: 4, State: []contract.StateEntry{
		{Step: "Count", KeyGroup: 7, Key: []byte("a")},
		{Step: "Count", KeyGroup: 9, Key: []byte("c"), Value: []byte("4")},
	}}
	if err := s.WriteCheckpoint("orders", "j1", cp2, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.Get("job/j1"); err != nil || string(v) != `{"state":"RUNNING"}` {
		t.Fatalf("registry: %q %v", v, err)
	}
	rs, last, err := s.Restore("orders", "j1")
	if err != nil || rs == nil || last.Epoch != 4 {
		t.Fatalf("restore: %+v %+v %v", rs, last, err)
	}
	scan := func(lineage, step string, kgs []int) map[string]string {
		got := map[string]string{}
		err := s.StateReader(lineage).Scan(context.Background(), step, kgs, func(kg uint16, k, v []byte) error {
			got[string(k)] = string(v)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := scan("orders", "Count", []int{7, 9}); len(got) != 2 || got["b"] != "2" || got["c"] != "4" {
		t.Errorf("Count state = %v", got)
	}
	if got := scan("orders", "Count", []int{9}); len(got) != 1 {
		t.Errorf("key group filter: %v", got)
	}
	if got := scan("other-lineage", "Count", []int{7, 9}); len(got) != 0 {
		t.Errorf("lineages leak: %v", got)
	}
	// Renaming a step rebinds its namespace: the state follows, no copy.
	var rw Write
	if err := s.Rebind(&rw, "orders", "Count", "CountByRegion"); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(&rw); err != nil {
		t.Fatal(err)
	}
	if got := scan("orders", "CountByRegion", []int{7, 9}); len(got) != 2 {
		t.Errorf("after rebind: %v", got)
	}
	if got := scan("orders", "Count", []int{7, 9}); len(got) != 0 {
		t.Errorf("old name still bound: %v", got)
	}
	if err := s.DropState("orders", "Other"); err != nil {
		t.Fatal(err)
	}
	if got := scan("orders", "Other", []int{7}); len(got) != 0 {
		t.Errorf("dropped state still there: %v", got)
	}
	if _, err := s.LastCheckpoint("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing checkpoint: %v", err)
	}
}

func TestHandoverRebindsAndDrops(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cp := &contract.Checkpoint{Epoch: 5, Positions: map[string][][]byte{"Read": {[]byte("p")}}, State: []contract.StateEntry{
		{Step: "Count", KeyGroup: 1, Key: []byte("a"), Value: []byte("1")},
		{Step: "Gone", KeyGroup: 1, Key: []byte("a"), Value: []byte("x")},
	}}
	if err := s.WriteCheckpoint("l", "old", cp, nil); err != nil {
		t.Fatal(err)
	}
	final := &contract.Checkpoint{Epoch: 6, Positions: cp.Positions, SinkParts: map[string][][]byte{"W": {[]byte("rows")}},
		State: []contract.StateEntry{{Step: "Count", KeyGroup: 1, Key: []byte("b"), Value: []byte("2")}}}
	var w Write
	w.Put("job/old", []byte("UPDATED"))
	w.Put("job/new", []byte("RUNNING"))
	h := Handover{Lineage: "l", OldJob: "old", NewJob: "new", Renames: map[string]string{"Count": "CountByUser"},
		Drops: []string{"Gone"}, Positions: map[string][][]byte{"ReadOrders": {[]byte("p")}}}
	if err := s.WriteHandover(h, final, &w); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	if err := s.StateReader("l").Scan(context.Background(), "CountByUser", []int{1}, func(_ uint16, k, v []byte) error {
		got[string(k)] = string(v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["a"] != "1" || got["b"] != "2" {
		t.Errorf("renamed step state = %v, want a=1 b=2 (old state plus the final checkpoint)", got)
	}
	n := 0
	_ = s.StateReader("l").Scan(context.Background(), "Gone", []int{1}, func(uint16, []byte, []byte) error { n++; return nil })
	if n != 0 {
		t.Errorf("dropped step still has %d keys", n)
	}
	rec, err := s.LastCheckpoint("new")
	if err != nil || rec.Epoch != 6 || string(rec.Positions["ReadOrders"][0]) != "p" || len(rec.SinkParts) != 0 {
		t.Fatalf("new job's checkpoint: %+v %v", rec, err)
	}
	if rec, err := s.LastCheckpoint("old"); err != nil || string(rec.SinkParts["W"][0]) != "rows" {
		t.Fatalf("old job's final checkpoint keeps its sink parts: %+v %v", rec, err)
	}
	if v, _ := s.Get("job/old"); string(v) != "UPDATED" {
		t.Errorf("registry not written with the handover")
	}
}
