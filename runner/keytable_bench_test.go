package runner

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkKeyTableFind looks keys up at random in the tables of 4,096 key
// groups, as an aggregation does for each element and each timer, at key
// counts from cache-resident to far beyond the caches.
func BenchmarkKeyTableFind(b *testing.B) {
	for _, keys := range []int{1000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			const ngroups = 4096
			groups := make([]*keyGroupState, ngroups)
			encs := make([][]byte, keys)
			hashes := make([]uint64, keys)
			for i := range keys {
				enc := binary.BigEndian.AppendUint64(nil, uint64(i))
				h := KeyHash(enc)
				kg := keyGroupOf(h, ngroups)
				if groups[kg] == nil {
					groups[kg] = &keyGroupState{}
				}
				groups[kg].add(newAggKey(uint16(kg), h, enc))
				encs[i], hashes[i] = enc, h
			}
			order := make([]int32, 1<<16)
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range order {
				order[i] = int32(rng.IntN(keys))
			}
			b.ResetTimer()
			for i := range b.N {
				j := order[i&(len(order)-1)]
				h := hashes[j]
				if groups[keyGroupOf(h, ngroups)].findBytes(h, encs[j]) == nil {
					b.Fatal("a held key was not found")
				}
			}
		})
	}
}

// BenchmarkKeyTableChurn replaces keys in the tables of 4,096 key groups
// as an aggregation in short windows over many keys does: each operation
// removes a held key (its window closed) and adds a key not held (the
// first element of its next window), which first looks it up in vain.
func BenchmarkKeyTableChurn(b *testing.B) {
	for _, keys := range []int{1000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			const ngroups = 4096
			groups := make([]*keyGroupState, ngroups)
			for kg := range groups {
				groups[kg] = &keyGroupState{}
			}
			// Twice as many names as held keys: held[i] is name i's record
			// while it is held.
			names := 2 * keys
			held := make([]*aggKey, names)
			encs := make([][]byte, names)
			hashes := make([]uint64, names)
			for i := range names {
				encs[i] = binary.BigEndian.AppendUint64(nil, uint64(i))
				hashes[i] = KeyHash(encs[i])
			}
			in := func(i int) {
				h := hashes[i]
				g := groups[keyGroupOf(h, ngroups)]
				if g.findBytes(h, encs[i]) != nil {
					b.Fatal("a key not held was found")
				}
				k := newAggKey(uint16(keyGroupOf(h, ngroups)), h, encs[i])
				g.add(k)
				held[i] = k
			}
			out := func(i int) {
				g := groups[keyGroupOf(hashes[i], ngroups)]
				g.remove(held[i])
				held[i] = nil
			}
			rng := rand.New(rand.NewPCG(1, 2))
			order := rng.Perm(names)
			for _, i := range order[:keys] {
				in(i)
			}
			// The keys held are order's first half; each operation moves
			// the oldest held out and the oldest free in.
			b.ResetTimer()
			for i := range b.N {
				outAt, inAt := i%names, (i+keys)%names
				out(order[outAt])
				in(order[inAt])
			}
		})
	}
}
