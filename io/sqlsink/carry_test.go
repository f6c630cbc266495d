package sqlsink

import (
	"context"
	"strings"
	"testing"

	"github.com/weir-dev/weir/runner/contract"
)

// TestUncommittedPartsCarryOver: when an epoch's commit fails (here for
// real: a trigger raises), the next PreCommit carries the worker's
// uncommitted rows, so a later epoch's commit — after which the sources
// acknowledge — and a restart from the later checkpoint both write them.
func TestUncommittedPartsCarryOver(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		s := e.sink(e.config(ModeUpsert, "region"), totalsSchema)
		tbl := quoteTable(e.table)
		var fail, clear []string
		if e.driver == DriverSQLite {
			fail = []string{`CREATE TRIGGER ` + e.table + `_f BEFORE INSERT ON ` + tbl + ` BEGIN SELECT RAISE(ABORT, 'injected fault'); END`}
			clear = []string{`DROP TRIGGER ` + e.table + `_f`}
		} else {
			fail = []string{`CREATE FUNCTION ` + e.table + `_f() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'injected fault'; END $$ LANGUAGE plpgsql`,
				`CREATE TRIGGER f BEFORE INSERT ON ` + tbl + ` FOR EACH ROW EXECUTE FUNCTION ` + e.table + `_f()`}
			clear = []string{`DROP TRIGGER f ON ` + tbl, `DROP FUNCTION ` + e.table + `_f()`}
		}
		for _, q := range fail {
			must(t, e.exec(q))
		}
		must(t, s.Write(ctx, 0, elemsOf(total("NORTH", 1, w0, onTime0))))
		p1, err := s.PreCommit(ctx, 0, 1)
		must(t, err)
		if err := s.Commit(ctx, 1, [][]byte{p1}); err == nil || !strings.Contains(err.Error(), "injected fault") {
			t.Fatalf("commit 1 with a failing table: %v, want the injected fault", err)
		}
		must(t, s.Write(ctx, 0, elemsOf(total("SOUTH", 2, w0, onTime0))))
		p2, err := s.PreCommit(ctx, 0, 2)
		must(t, err)
		for _, q := range clear {
			must(t, e.exec(q))
		}
		// A restart from checkpoint 2 commits only its parts: they hold
		// NORTH too.
		r, err := New(e.config(ModeUpsert, "region"), totalsSchema)
		must(t, err)
		defer r.Close(ctx)
		must(t, r.Commit(ctx, 2, [][]byte{p2}))
		if n := e.count(); n != 2 {
			t.Fatalf("after committing checkpoint 2: %d rows, want 2 (NORTH of the failed epoch 1 and SOUTH)", n)
		}
		// The running sink's commit of epoch 2 is then a no-op.
		must(t, s.Commit(ctx, 2, [][]byte{p2}))
		if n := e.count(); n != 2 {
			t.Fatalf("%d rows, want 2", n)
		}
	})
}

func elemsOf(e ...contract.Element) []contract.Element { return e }

// TestFinalShareInSameEpoch: a worker's final share pre-committed for the
// epoch of a barrier it already pre-committed (the input ended while that
// checkpoint was in flight) carries that part's rows: the checkpoint may
// use either part, so neither may be empty. Before, the second part was
// empty, a commit of it succeeded even while the table refused rows, and
// the rows were dropped with the pending part.
func TestFinalShareInSameEpoch(t *testing.T) {
	forEachDriver(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		s := e.sink(e.config(ModeUpsert, "region"), totalsSchema)
		must(t, s.Write(ctx, 0, elemsOf(total("NORTH", 1, w0, onTime0))))
		p, err := s.PreCommit(ctx, 0, 2)
		must(t, err)
		final, err := s.PreCommit(ctx, 0, 2)
		must(t, err)
		if len(p) == 0 || len(final) == 0 {
			t.Fatalf("parts of %d and %d bytes, want both to carry NORTH", len(p), len(final))
		}
		must(t, s.Commit(ctx, 2, [][]byte{final}))
		if n := e.count(); n != 1 {
			t.Fatalf("after committing the final share: %d rows, want 1", n)
		}
	})
}
