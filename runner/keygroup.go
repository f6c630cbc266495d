package runner

import "github.com/cespare/xxhash/v2"

// KeyHash is the fixed, documented 64-bit hash of a canonically encoded key:
// xxHash64 with seed 0. It never changes between processes or releases,
// because key groups (and so where state lives) are derived from it.
func KeyHash(key []byte) uint64 { return xxhash.Sum64(key) }

// KeyGroup returns the key group of an encoded key among n key groups:
// KeyHash(key) mod n.
func KeyGroup(key []byte, n int) int { return int(KeyHash(key) % uint64(n)) }

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
