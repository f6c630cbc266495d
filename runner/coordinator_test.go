package runner

import "testing"

// TestCoordinatorStaleFinalReport: a participant that finishes while a
// checkpoint begins reports with the epoch it read before the checkpoint
// stored its own (Execution.checkpoint begins the epoch, then stores it).
// Its final report stands in for the pending epoch: when it is the last
// one the epoch waits for, the checkpoint completes. Before, the report
// was only kept for later epochs and the pending checkpoint never
// completed: once the execution had ended nothing reported again, and the
// checkpoint (a supervisor's periodic or final one) waited forever.
func TestCoordinatorStaleFinalReport(t *testing.T) {
	c := newCoordinator()
	c.register("source/Events/0")
	c.register("sink/Write/0")
	p := c.begin(5)
	c.submit("source/Events/0", &report{epoch: 5, source: "Events", positions: map[int][]byte{0: {9}}})
	select {
	case <-p.done:
		t.Fatal("checkpoint 5 completed without the sink")
	default:
	}
	// Read epoch 4 before checkpoint 5 stored its epoch.
	c.submit("sink/Write/0", &report{epoch: 4, sink: "Write", worker: 0, part: []byte("rows"), finished: true})
	select {
	case <-p.done:
	default:
		t.Fatal("checkpoint 5 did not complete with the sink's final report, the last it waited for")
	}
	if got := p.cp.SinkParts["Write"]; len(got) != 1 || string(got[0]) != "rows" {
		t.Errorf("checkpoint 5's sink parts: %q, want the final part", got)
	}
	// The final report stands in for the next epoch too.
	p6 := c.begin(6)
	c.submit("source/Events/0", &report{epoch: 6, source: "Events", positions: map[int][]byte{0: {10}}})
	select {
	case <-p6.done:
	default:
		t.Fatal("checkpoint 6 did not complete")
	}
}

// TestCoordinatorRepeatsUncommittedFinalShare: a sink that finished
// pre-commits nothing more, so its final share is repeated in every later
// checkpoint until a commit covering it succeeds: when the commit of the
// checkpoint that carried it fails (the table refused rows), the next
// checkpoint's commit retries the rows, and a restart from it still has
// them. Before, later checkpoints carried no part for the sink: their
// commit succeeded without the rows and the sink dropped them.
func TestCoordinatorRepeatsUncommittedFinalShare(t *testing.T) {
	c := newCoordinator()
	c.register("source/Events/0")
	c.register("sink/Write/0")
	parts := func(e uint64) [][]byte {
		t.Helper()
		p := c.begin(e)
		c.submit("source/Events/0", &report{epoch: e, source: "Events", positions: map[int][]byte{0: {byte(e)}}})
		select {
		case <-p.done:
		default:
			t.Fatalf("checkpoint %d did not complete", e)
		}
		return p.cp.SinkParts["Write"]
	}
	p5 := c.begin(5)
	c.submit("sink/Write/0", &report{epoch: 5, sink: "Write", worker: 0, part: []byte("rows"), finished: true})
	c.submit("source/Events/0", &report{epoch: 5, source: "Events", positions: map[int][]byte{0: {5}}})
	<-p5.done
	// Checkpoint 5's commit failed: 6 and 7 carry the share again.
	for _, e := range []uint64{6, 7} {
		if got := parts(e); len(got) != 1 || string(got[0]) != "rows" {
			t.Fatalf("checkpoint %d's sink parts: %q, want the uncommitted final share", e, got)
		}
	}
	// Checkpoint 7's commit succeeded: 8 carries nothing.
	c.committed("Write", 7)
	if got := parts(8); len(got) != 0 {
		t.Fatalf("checkpoint 8's sink parts: %q, want none once a commit covered the share", got)
	}
}
