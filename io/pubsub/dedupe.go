package pubsub

import (
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
// the window or when the set holds max IDs.
type seenIDs struct {
	window mtime.Duration
	max    int
	newest mtime.Time
	ids    map[string]mtime.Time
	// order holds the IDs in insertion order from head on; publish times
	// are non-decreasing along it, as stream order follows publish time.
	order []seenEntry
	head  int
}

type seenEntry struct {
	id string
	t  mtime.Time
}

func newSeenIDs(window mtime.Duration, max int) *seenIDs {
	return &seenIDs{window: window, max: max, newest: mtime.MinTimestamp, ids: make(map[string]mtime.Time)}
}

// check reports whether id was seen within the window before t, and
// remembers it at t if not.
func (s *seenIDs) check(id string, t mtime.Time) bool {
	s.newest = mtime.Max(s.newest, t)
	s.evict()
	if at, ok := s.ids[id]; ok && at >= s.newest.Add(-s.window) {
		return true
	}
	s.ids[id] = t
	s.order = append(s.order, seenEntry{id, t})
	s.evict()
	return false
}

func (s *seenIDs) evict() {
	floor := s.newest.Add(-s.window)
	for s.head < len(s.order) {
		e := s.order[s.head]
		if e.t >= floor && len(s.ids) <= s.max {
			break
		}
		if s.ids[e.id] == e.t {
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
