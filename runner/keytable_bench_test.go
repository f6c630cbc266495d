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
