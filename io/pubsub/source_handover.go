// This file holds what a ReadFromPubSub source with de-duplication hands
// over to the source that replaces it: the message IDs its split
// remembered, taken over in memory at an in-place update or a rescale
// (contract.SourceAdopter), so that the new split does not read them back
// from the topic; and the read-back's counters.

package pubsub

import (
	"sync/atomic"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
)

// readBackBatch is how many messages one fetch of the dedupe read-back
// asks for.
const readBackBatch = 1024

// seenHandoff is the dedupe memory of a closed split: the IDs it had seen
// when its position was seq on subscription sub.
type seenHandoff struct {
	sub  string
	seq  uint64
	seen *seenIDs
}

// readBackStats counts the read-back of dedupe IDs at resumes.
type readBackStats struct {
	resumes, fetches, messages atomic.Int64
}

// ReadBack is what a source's resumes read back from the topic to
// de-duplicate across a restart.
type ReadBack struct {
	// Resumes counts the resumes that read IDs back (not those that took
	// them over in memory from the source they replaced).
	Resumes int64
	// Fetches and Messages count the fetches and the messages read back.
	Fetches, Messages int64
}

// ReadBack returns what the source's resumes read back so far.
func (s *Source) ReadBack() ReadBack {
	r := &s.readBack
	return ReadBack{Resumes: r.resumes.Load(), Fetches: r.fetches.Load(), Messages: r.messages.Load()}
}

// AdoptSource implements contract.SourceAdopter: the runner calls it, at an
// in-place update or a rescale, with the source of the same step in the
// execution being replaced, before Resume. When that source de-duplicated
// the same subscription by the same ID, its last split's memory of IDs is
// taken over; the split that resumes exactly where that split stopped uses
// it instead of reading the IDs back from the topic. Anything else (no
// de-duplication, another subscription or ID, a resume from another
// position) falls back to the read-back.
func (s *Source) AdoptSource(old contract.Source) {
	o, ok := old.(*Source)
	if !ok || o == s || o.b != s.b {
		return
	}
	oc, nc := &o.cfg, &s.cfg
	if oc.Subscription != nc.Subscription || oc.IDAttribute != nc.IDAttribute || oc.IDField != nc.IDField ||
		(nc.IDAttribute == "" && nc.IDField == "") {
		return
	}
	h := o.closedSeen.Swap(nil)
	if h == nil {
		return
	}
	h.seen.window, h.seen.max = mtime.FromDuration(nc.DedupeWindow), nc.MaxDedupeIDs
	h.seen.evict()
	s.adopted.Store(h)
}

// takeAdopted returns the adopted memory of IDs when it is the one of a
// split that stopped at from, else nil (and drops it either way: it serves
// one resume).
func (s *Source) takeAdopted(from *position) *seenIDs {
	h := s.adopted.Swap(nil)
	if h == nil || h.sub != s.cfg.Subscription || h.seq != from.StreamSeq {
		return nil
	}
	return h.seen
}

// handOff records, when the split closes, what it remembered of IDs, for
// the source that may replace its source (AdoptSource).
func (s *split) handOff() {
	if s.seen == nil {
		return
	}
	s.src.closedSeen.Store(&seenHandoff{sub: s.cfg.Subscription, seq: s.pos.StreamSeq, seen: s.seen})
}
