package runner

// This file holds a keyed aggregation's record of one key (aggKey) and of
// its windows (winState), and the compact layout that keeps a held key at
// one 128-byte object.

import (
	"unsafe"

	"github.com/weir-dev/weir/window"
)

// winState is one key's state in one window of an aggregation.
type winState struct {
	w   window.Window
	st  window.State
	acc any
	// held: a pane of the window was held back at a −∞ watermark
	// (Options.HoldPanesAtMinWatermark); it is in aggNode.held.
	held bool
	// queued: the window is in aggNode.touched, to be evaluated at the
	// end of the bundle that touched it.
	queued bool
}

// aggKey is a keyed aggregation's record of one key held in a key group:
// its encoding (and value, where it is kept), its windows' state and its
// place in the change log.
type aggKey struct {
	// x holds what few keys have (see aggKeyExtra); nil for most.
	x *aggKeyExtra
	// dirty is the change-log generation in which the key last changed
	// (see changeLog).
	dirty uint64
	// one is the key's window when it has exactly one (x.more holds them
	// when it has several, and one is then nil). Most keys only ever have
	// one window (the global one, or one fixed window at a time): one
	// word, not a slice's three and its array's one. See windows.
	one *winState
	// win0 holds the key's first window inside the key itself: a million
	// keys are then a million objects fewer for the garbage collector to
	// mark. It serves only the key's first window (used), never a later
	// one, so that a pointer to a closed window never aliases a new one.
	win0 winState
	// hi is the upper half of the key's KeyHash: what the key group's
	// table reads (tableHash). The lower half only picks the key group.
	hi uint32
	// n is the length of the encoding held in inline, or longKey when
	// the encoding is longer than keyInline (x.long holds it). See enc.
	n    uint8
	used bool
	// dead is set when the key left its key group.
	dead bool
	// inline holds the key's encoding when it is short (setStr): one
	// object per key, not two. With it the key is 128 bytes, a size class.
	inline [keyInline]byte
}

// longKey is aggKey.n for a key whose encoding is in x.long.
const longKey = 0xff

// aggKeyExtra is what an aggKey holds only when it needs it: an encoding
// longer than keyInline, its key value, kept for a step whose keys do not
// read back from their encodings (aggNode.ek nil), and its windows when
// it has more than one (sliding windows, sessions). Behind one pointer, so
// that the short keys of a combine with one window at a time are 32 bytes
// smaller.
type aggKeyExtra struct {
	long string
	key  any
	more []*winState
}

// val returns the key's value, nil when the key is kept as its encoding
// only.
func (k *aggKey) val() any {
	if k.x == nil {
		return nil
	}
	return k.x.key
}

// setVal sets the key's value.
func (k *aggKey) setVal(v any) {
	if k.x == nil {
		if v == nil {
			return
		}
		k.x = &aggKeyExtra{}
	}
	k.x.key = v
}

// keyInline is the longest key encoding kept inside its aggKey.
const keyInline = 17

// newAggKey returns a key encoded as enc, with hash h.
func newAggKey(h uint64, enc []byte) *aggKey {
	k := &aggKey{hi: uint32(h >> 32)}
	k.setStr(enc)
	return k
}

// deadKey returns a key encoded as enc, with hash h (its upper half is
// enough: tableHash), that left its key group: its checkpoint entry is a
// deletion.
func deadKey(h uint64, enc string) aggKey {
	k := aggKey{hi: uint32(h >> 32), dead: true}
	k.setStr(unsafe.Slice(unsafe.StringData(enc), len(enc)))
	return k
}

// setEncoding sets k's encoding (setStr) and its hash, for a key read
// from the store.
func (k *aggKey) setEncoding(enc []byte) {
	k.setStr(enc)
	k.hi = uint32(KeyHash(enc) >> 32)
}

// setStr sets k's encoding to a copy of enc, once: inside k when it fits
// (inline, which is never written again, so the strings enc returns stay
// immutable), else a string of its own (x.long).
func (k *aggKey) setStr(enc []byte) {
	if len(enc) > keyInline {
		if k.x == nil {
			k.x = &aggKeyExtra{}
		}
		k.x.long = string(enc)
		k.n = longKey
		return
	}
	k.n = uint8(copy(k.inline[:], enc))
}

// enc returns the key's encoding (its map key in the checkpoint).
func (k *aggKey) enc() string {
	if k.n == longKey {
		return k.x.long
	}
	return unsafe.String(&k.inline[0], k.n)
}

// tableHash returns the part of the key's hash its key group's table
// reads (the upper half): enough to find the key again (keyGroupState.find).
func (k *aggKey) tableHash() uint64 { return uint64(k.hi) << 32 }

// windows returns the key's windows. The slice may alias the key: a
// caller that changes it gives it back with setWindows.
func (k *aggKey) windows() []*winState {
	if k.x != nil && k.x.more != nil {
		return k.x.more
	}
	if k.one == nil {
		return nil
	}
	return unsafe.Slice(&k.one, 1)
}

// setWindows makes ws the key's windows.
func (k *aggKey) setWindows(ws []*winState) {
	switch len(ws) {
	case 0, 1:
		// ws may alias k.one (windows): read it before writing k.one.
		var one *winState
		if len(ws) == 1 {
			one = ws[0]
		}
		k.one = one
		if k.x != nil {
			k.x.more = nil
		}
	default:
		if k.x == nil {
			k.x = &aggKeyExtra{}
		}
		k.x.more = ws
		k.one = nil
	}
}

// newWindow adds window w, with state st, to the key's windows.
func (k *aggKey) newWindow(w window.Window, st window.State) *winState {
	var ws *winState
	if !k.used {
		k.used = true
		k.win0 = winState{w: w, st: st}
		ws = &k.win0
	} else {
		ws = &winState{w: w, st: st}
	}
	k.setWindows(append(k.windows(), ws))
	return ws
}

func (k *aggKey) has(ws *winState) bool {
	for _, c := range k.windows() {
		if c == ws {
			return true
		}
	}
	return false
}
