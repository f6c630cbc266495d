package runner

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestSFGroup: keys added to and removed from a stateful step's key group
// in a random order, many of them on the same home slot (their hashes'
// upper halves alike in the low bits), are found exactly while held: a
// removal moves the keys after it back where their search reaches them.
func TestSFGroup(t *testing.T) {
	for _, tc := range []struct {
		name   string
		keys   int
		spread uint32 // distinct home slots the keys' hashes give at most
		// atEnd puts the home slots at the table's end, so that runs wrap
		// around to its start.
		atEnd bool
	}{{"few", 5, 4, false}, {"crowded", 200, 8, false}, {"wrapping", 200, 8, true}, {"spread", 2000, 1 << 20, false}} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tc.keys)))
			g := &sfGroup{}
			held := map[string]*sfKey{}
			hashOf := map[string]uint64{}
			var order []string
			for i := range tc.keys {
				s := fmt.Sprintf("key-%d", i)
				hi := rng.Uint32N(tc.spread)
				if tc.atEnd {
					hi = ^hi
				}
				h := uint64(hi)<<32 | uint64(i)
				k := &sfKey{str: s, hi: uint32(h >> 32)}
				g.add(k)
				held[s], hashOf[s] = k, h
				order = append(order, s)
			}
			check := func(when string) {
				t.Helper()
				if g.n != len(held) {
					t.Fatalf("%s: the group counts %d keys, holds %d", when, g.n, len(held))
				}
				for _, s := range order {
					got := g.find(uint32(hashOf[s]>>32), s)
					if want := held[s]; got != want {
						t.Fatalf("%s: find(%s) = %p, want %p", when, s, got, want)
					}
				}
				n := 0
				for range g.all() {
					n++
				}
				if n != len(held) {
					t.Fatalf("%s: all yields %d keys, want %d", when, n, len(held))
				}
			}
			check("after the adds")
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for i, s := range order {
				if i%2 == 0 {
					g.remove(held[s])
					delete(held, s)
				}
			}
			check("after removing half")
			g.remove(&sfKey{str: "never-held", hi: 3}) // ignored
			check("after removing a key never held")
			for s, k := range held {
				g.remove(k)
				delete(held, s)
			}
			check("after removing every key")
		})
	}
}
