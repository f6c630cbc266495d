package runner

import "github.com/cespare/xxhash/v2"

// KeyHash is the fixed, documented 64-bit hash of a canonically encoded key:
// xxHash64 with seed 0. It never changes between processes or releases,
// because key groups (and so where state lives) are derived from it.
func KeyHash(key []byte) uint64 { return xxhash.Sum64(key) }

// KeyGroup returns the key group of an encoded key among n key groups:
// KeyHash(key) mod n.
func KeyGroup(key []byte, n int) int { return int(keyGroupOf(KeyHash(key), uint64(n))) }

// keyGroupOf returns h mod n, the key group of a key with hash h among n
// key groups. The runner computes it once or twice per element: with a
// power of two of key groups (the default's 4,096) it is a mask, not a
// 64-bit division, whose latency the lookup of the key's group then waits
// on.
func keyGroupOf(h, n uint64) uint64 {
	if n&(n-1) == 0 {
		return h & (n - 1)
	}
	return h % n
}

// RoutingTable maps every key group to the worker that owns it. Rescaling
// rewrites the table; keys are never re-hashed.
type RoutingTable []uint16

// NewRoutingTable spreads n key groups over workers in contiguous ranges.
func NewRoutingTable(keyGroups, workers int) RoutingTable {
	t := make(RoutingTable, keyGroups)
	for kg := range t {
		t[kg] = uint16(kg * workers / keyGroups)
	}
	return t
}

// Owned returns the key groups that worker w owns.
func (t RoutingTable) Owned(w int) []int {
	var out []int
	for kg, o := range t {
		if int(o) == w {
			out = append(out, kg)
		}
	}
	return out
}
