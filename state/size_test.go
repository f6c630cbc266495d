package state

import (
	"context"
	"testing"

	"github.com/weir-dev/weir/runner/contract"
)

// TestStateSize: a step's state size is the bytes of its stored keys and
// values (with the store's key prefix), follows its checkpoints (a key
// deleted, a value grown), is 0 for a step without state, and leaves
// other steps' and lineages' state out.
func TestStateSize(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	entry := func(step, key string, n int) contract.StateEntry {
		return contract.StateEntry{Step: step, KeyGroup: 3, Key: []byte(key), Value: make([]byte, n)}
	}
	// A stored key is the store's prefix (8 bytes: "s/", the 4-byte
	// namespace, the 2-byte key group) and the key.
	const prefix = 8
	steps := []struct {
		name    string
		cp      []contract.StateEntry
		lineage string
		want    map[string]int64
	}{
		{name: "two keys", lineage: "orders", cp: []contract.StateEntry{entry("Count", "a", 10), entry("Count", "bb", 20), entry("Sum", "a", 5)},
			want: map[string]int64{"Count": prefix + 1 + 10 + prefix + 2 + 20, "Sum": prefix + 1 + 5, "Nothing": 0}},
		{name: "a key deleted, one grown", lineage: "orders", cp: []contract.StateEntry{{Step: "Count", KeyGroup: 3, Key: []byte("a")}, entry("Count", "bb", 100)},
			want: map[string]int64{"Count": prefix + 2 + 100, "Sum": prefix + 1 + 5}},
		{name: "another lineage", lineage: "billing", cp: []contract.StateEntry{entry("Count", "zzz", 1000)},
			want: map[string]int64{"Count": prefix + 2 + 100}},
	}
	for i, st := range steps {
		if err := s.WriteCheckpoint(st.lineage, "j-"+st.lineage, &contract.Checkpoint{Epoch: uint64(i + 1), State: st.cp}, nil); err != nil {
			t.Fatal(err)
		}
		for step, want := range st.want {
			got, exact, err := s.StateSize(ctx, "orders", step, nil)
			if err != nil || !exact || got != want {
				t.Errorf("%s: StateSize(orders, %s) = %d (exact %v, %v), want %d", st.name, step, got, exact, err, want)
			}
		}
	}
}
