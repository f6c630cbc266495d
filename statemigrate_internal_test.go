package weir

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weir-dev/weir/runner/contract"
)

// TestStateMigrationCodec: a migrated cell reads an earlier version's
// value through the declared function, marks what it stores and reads that
// back as is (and so does a version without the declaration); a value the
// function refuses is dropped (contract.ErrStateDropped) and counted as
// the step's reject. Declarations that cannot apply are errors naming why.
func TestStateMigrationCodec(t *testing.T) {
	type tally struct{ N, Since int64 }
	build := func(decls []StateDecl, opts ...StepOption) (contract.StateCoder, error) {
		p := NewPipeline()
		s := p.Root()
		in := Create(s, "In", []KV[string, int64]{{Key: "a", Value: 1}})
		StatefulParDo(s, "Tally", in, StatefulFn[string, int64, int64]{State: decls,
			Process: func(*StateContext[string, int64], int64) error { return nil }}, opts...)
		if err := p.Err(); err != nil {
			return nil, err
		}
		return p.Program().Code["Tally"].(contract.StateCoder), nil
	}
	migrate := MigrateState("count", func(n int64) (tally, error) {
		if n < 0 {
			return tally{}, fmt.Errorf("a negative count %d", n)
		}
		return tally{N: n}, nil
	})
	sc, err := build([]StateDecl{ValueState[tally]{ID: "count"}, BagState[string]{ID: "log"}}, migrate)
	if err != nil {
		t.Fatal(err)
	}
	v, err := sc.DecodeState("count", []byte("7"))
	if err != nil || v.(tally) != (tally{N: 7}) {
		t.Fatalf("an earlier version's 7: %v, %v", v, err)
	}
	b, err := sc.EncodeState("count", tally{N: 8, Since: 1})
	if err != nil || b[0] != migratedAccumulator {
		t.Fatalf("stored %q, %v: want it marked", b, err)
	}
	if v, err := sc.DecodeState("count", b); err != nil || v.(tally) != (tally{N: 8, Since: 1}) {
		t.Fatalf("read back: %v, %v", v, err)
	}
	if _, err := sc.DecodeState("count", []byte("-3")); !errors.Is(err, contract.ErrStateDropped) || !strings.Contains(err.Error(), "a negative count -3") {
		t.Fatalf("a refused value: %v, want ErrStateDropped naming why", err)
	}
	if got := sc.(contract.StateRejecter).StateRejects(); got[stateMigrationFailed] != 1 {
		t.Errorf("rejects %v, want 1 %s", got, stateMigrationFailed)
	}
	// A later version without the declaration reads the marked value.
	later, err := build([]StateDecl{ValueState[tally]{ID: "count"}, BagState[string]{ID: "log"}})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := later.DecodeState("count", b); err != nil || v.(tally) != (tally{N: 8, Since: 1}) {
		t.Fatalf("read by a later version: %v, %v", v, err)
	}

	// A map cell migrates its entries' values; the keys stay as stored.
	mc, err := build([]StateDecl{MapState[string, tally]{ID: "count"}}, migrate)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := mc.DecodeState("count#key", []byte(`"east"`)); err != nil || v.(string) != "east" {
		t.Fatalf("a map's stored key: %v, %v", v, err)
	}
	if v, err := mc.DecodeState("count#value", []byte("7")); err != nil || v.(tally) != (tally{N: 7}) {
		t.Fatalf("a map's stored 7: %v, %v", v, err)
	}
	if b, err := mc.EncodeState("count#value", tally{N: 9}); err != nil || b[0] != migratedAccumulator {
		t.Fatalf("a map's value stored %q, %v: want it marked", b, err)
	}
	if _, err := mc.DecodeState("count#value", []byte("-1")); !errors.Is(err, contract.ErrStateDropped) {
		t.Fatalf("a map's refused value: %v, want ErrStateDropped", err)
	}

	for _, tc := range []struct {
		name  string
		decls []StateDecl
		opts  []StepOption
		want  string
	}{
		{"an undeclared cell", []StateDecl{ValueState[tally]{ID: "total"}}, []StepOption{migrate}, `names state "count", which the step does not declare (its state: [total])`},
		{"another type", []StateDecl{ValueState[int64]{ID: "count"}}, []StepOption{migrate}, `on state "count" returns weir.tally, but the cell holds int64`},
		{"a map of other values", []StateDecl{MapState[string, int64]{ID: "count"}}, []StepOption{migrate}, `on state "count" returns weir.tally, but the map's values are int64`},
		{"twice", []StateDecl{ValueState[tally]{ID: "count"}}, []StepOption{migrate, migrate}, `two migrations declared`},
	} {
		if _, err := build(tc.decls, tc.opts...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
