package contract

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortStateEntries: entries come out by step, key group and key, a
// deletion before a value of the same key, and entries that compare equal
// keep their order (the last of two values of one key is the one a store
// keeps).
func TestSortStateEntries(t *testing.T) {
	del := func(step string, kg uint16, key string) StateEntry {
		return StateEntry{Step: step, KeyGroup: kg, Key: []byte(key)}
	}
	val := func(step string, kg uint16, key, v string) StateEntry {
		return StateEntry{Step: step, KeyGroup: kg, Key: []byte(key), Value: []byte(v)}
	}
	for _, tc := range []struct {
		name     string
		in, want []StateEntry
	}{
		{"empty", nil, nil},
		{"by step, key group, key",
			[]StateEntry{val("b", 0, "a", "1"), val("a", 2, "a", "2"), val("a", 1, "b", "3"), val("a", 1, "a", "4")},
			[]StateEntry{val("a", 1, "a", "4"), val("a", 1, "b", "3"), val("a", 2, "a", "2"), val("b", 0, "a", "1")}},
		{"deletion before value",
			[]StateEntry{val("s", 0, "k", "new"), del("s", 0, "k")},
			[]StateEntry{del("s", 0, "k"), val("s", 0, "k", "new")}},
		{"equal entries keep their order",
			[]StateEntry{val("s", 0, "k", "first"), val("s", 0, "a", "x"), val("s", 0, "k", "second")},
			[]StateEntry{val("s", 0, "a", "x"), val("s", 0, "k", "first"), val("s", 0, "k", "second")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := slices.Clone(tc.in)
			SortStateEntries(got)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// TestSortStateEntriesMatchesStableSort: on many random entries with
// repeated keys the order is the stable sort's.
func TestSortStateEntriesMatchesStableSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	es := make([]StateEntry, 5000)
	for i := range es {
		es[i] = StateEntry{Step: fmt.Sprint("s", r.IntN(3)), KeyGroup: uint16(r.IntN(4)), Key: []byte(fmt.Sprint(r.IntN(50)))}
		if r.IntN(4) > 0 {
			es[i].Value = []byte(fmt.Sprint(i))
		}
	}
	want := slices.Clone(es)
	slices.SortStableFunc(want, func(a, b StateEntry) int { return compareEntries(&a, &b) })
	SortStateEntries(es)
	if fmt.Sprint(es) != fmt.Sprint(want) {
		t.Error("SortStateEntries differs from a stable sort")
	}
}
