package pubsub

import (
	"hash/maphash"
	"time"

	"github.com/weir-dev/weir/mtime"
)

// Dedupe defaults.
const (
	// DefaultDedupeWindow is how long a source remembers message IDs.
	DefaultDedupeWindow = 10 * time.Minute
	// DefaultMaxDedupeIDs caps how many IDs a source remembers.
	DefaultMaxDedupeIDs = 1_000_000
)

// seenIDs is a bounded, time-indexed set of message IDs: an ID is a
// duplicate if it was seen with a publish time within window of the newest
// publish time seen. The oldest IDs are forgotten first, when they leave
// the window or when the set holds max IDs. With each ID it keeps a hash
// of its message's data, so that a duplicate with other data (an ID
// reused for another message) can be told apart.
type seenIDs struct {
	window mtime.Duration
	max    int
	newest mtime.Time
	seed   maphash.Seed
	ids    map[string]seenAt
	// order holds the IDs in insertion order from head on; publish times
	// are non-decreasing along it, as stream order follows publish time.
	order []seenEntry
	head  int
}

type seenEntry struct {
	id string
	t  mtime.Time
}

// seenAt is when an ID was seen and the hash of its message's data (0:
// not known, as for IDs read back from headers only).
type seenAt struct {
	t mtime.Time
	h uint64
}

func newSeenIDs(window mtime.Duration, max int) *seenIDs {
	return &seenIDs{window: window, max: max, newest: mtime.MinTimestamp, seed: maphash.MakeSeed(), ids: make(map[string]seenAt)}
}

// hash returns the hash check compares a message's data by; never 0.
func (s *seenIDs) hash(data []byte) uint64 {
	return maphash.Bytes(s.seed, data) | 1
}

// check reports whether id was seen within the window before t, and
// remembers it at t, with h (the hash of its data, 0 when not known), if
// not. conflict reports a duplicate whose data hash differs from the one
// remembered (both known).
func (s *seenIDs) check(id string, t mtime.Time, h uint64) (dup, conflict bool) {
	s.newest = mtime.Max(s.newest, t)
	s.evict()
	if prev, ok := s.lookup(id); ok {
		return true, prev != 0 && h != 0 && prev != h
	}
	s.put(id, t, h)
	return false, false
}

// lookup returns the data hash remembered for id, when id was seen within
// the window of the newest time seen.
func (s *seenIDs) lookup(id string) (uint64, bool) {
	at, ok := s.ids[id]
	if !ok || at.t < s.newest.Add(-s.window) {
		return 0, false
	}
	return at.h, true
}

// put remembers id at t with data hash h, in place of what was remembered
// of it.
func (s *seenIDs) put(id string, t mtime.Time, h uint64) {
	s.newest = mtime.Max(s.newest, t)
	s.ids[id] = seenAt{t, h}
	s.order = append(s.order, seenEntry{id, t})
	s.evict()
}

func (s *seenIDs) evict() {
	floor := s.newest.Add(-s.window)
	for s.head < len(s.order) {
		e := s.order[s.head]
		if e.t >= floor && len(s.ids) <= s.max {
			break
		}
		if s.ids[e.id].t == e.t {
			delete(s.ids, e.id)
		}
		s.order[s.head] = seenEntry{}
		s.head++
	}
	if s.head > 1024 && s.head*2 > len(s.order) {
		n := copy(s.order, s.order[s.head:])
		clear(s.order[n:])
		s.order = s.order[:n]
		s.head = 0
	}
}

// len returns how many IDs are remembered.
func (s *seenIDs) len() int { return len(s.ids) }
