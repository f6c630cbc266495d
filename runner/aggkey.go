package runner

// This file holds a keyed aggregation's record of one key (aggKey) and of
// its windows (winState), and the compact layout that keeps a held key at
// one 96-byte object.

import (
	"unsafe"

	"github.com/weir-dev/weir/window"
)

// winState is one key's state in one window of an aggregation. Its
// marks (whether it is queued for evaluation, whether its pane is held
// back) are in st.Marks, which the window machine leaves alone: a
// window's state is then 56 bytes, not 64.
type winState struct {
	w   window.Window
	st  window.State
	acc any
}

// The bits of winState.st.Marks.
const (
	// markHeld: a pane of the window was held back at a −∞ watermark
	// (Options.HoldPanesAtMinWatermark); it is in aggNode.held.
	markHeld uint8 = 1 << iota
	// markQueued: the window is in aggNode.touched, to be evaluated at
	// the end of the bundle that touched it.
	markQueued
)

func (ws *winState) held() bool   { return ws.st.Marks()&markHeld != 0 }
func (ws *winState) queued() bool { return ws.st.Marks()&markQueued != 0 }

func (ws *winState) setMark(m uint8, on bool) {
	if on {
		ws.st.SetMarks(ws.st.Marks() | m)
	} else {
		ws.st.SetMarks(ws.st.Marks() &^ m)
	}
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
	// win0 holds a window of the key inside the key itself (keyWin0 says
	// whether it holds one now): a million keys are then a million
	// objects fewer for the garbage collector to mark. Most keys have one
	// window (the global one, or one fixed window at a time), so most are
	// one object; win0 takes the key's next window once its window closed
	// (newWindow). See windows.
	win0 winState
	// hi is the upper half of the key's KeyHash: what the key group's
	// table reads (tableHash). The lower half only picks the key group.
	hi uint32
	// kg is the key's key group: the change log names a key by its
	// record alone.
	kg uint16
	// n is the length of the encoding held in inline, or longKey when
	// the encoding is longer than keyInline (x.long holds it). See enc.
	n uint8
	// bits holds keyWin0, keySpent and keyDead.
	bits uint8
	// inline holds the key's encoding when it is short (setStr): one
	// object per key, not two. With it the key is 96 bytes, a size class.
	inline [keyInline]byte
}

// The bits of aggKey.bits.
const (
	// keyWin0: win0 holds one of the key's windows.
	keyWin0 uint8 = 1 << iota
	// keySpent: win0 held a window that merged away in a bundle, and is
	// not used again (a merging step's touched list may still point at
	// it until the bundle ends). Only merging windows (sessions) set it.
	keySpent
	// keyDead: the key left its key group.
	keyDead
)

func (k *aggKey) dead() bool { return k.bits&keyDead != 0 }

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
	// more lists the key's windows when win0 alone does not hold them:
	// when the key has several, or its one window is not in win0 (a
	// window given to setWindows from elsewhere). It lists win0 too when
	// win0 holds one of them (keyWin0).
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
const keyInline = 16

// newAggKey returns a key of key group kg encoded as enc, with hash h.
func newAggKey(kg uint16, h uint64, enc []byte) *aggKey {
	k := &aggKey{hi: uint32(h >> 32), kg: kg}
	k.setStr(enc)
	return k
}

// deadKey returns a key of key group kg encoded as enc, with hash h (its
// upper half is enough: tableHash), that left its key group: its
// checkpoint entry is a deletion.
func deadKey(kg uint16, h uint64, enc string) aggKey {
	k := aggKey{hi: uint32(h >> 32), kg: kg, bits: keyDead}
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

// nwin returns how many windows the key has.
func (k *aggKey) nwin() int {
	if k.x != nil && k.x.more != nil {
		return len(k.x.more)
	}
	if k.bits&keyWin0 != 0 {
		return 1
	}
	return 0
}

// win returns the key's i-th window, 0 ≤ i < nwin.
func (k *aggKey) win(i int) *winState {
	if k.x != nil && k.x.more != nil {
		return k.x.more[i]
	}
	return &k.win0
}

// windows returns the key's windows. The slice may alias the key: a
// caller that changes it gives it back with setWindows. A key whose one
// window is in win0 returns a new slice (one allocation): the paths run
// per element or per key use nwin and win.
func (k *aggKey) windows() []*winState {
	if k.x != nil && k.x.more != nil {
		return k.x.more
	}
	if k.bits&keyWin0 == 0 {
		return nil
	}
	return []*winState{&k.win0}
}

// setWindows makes ws the key's windows. A win0 left out of ws is free
// for the key's next window (newWindow).
func (k *aggKey) setWindows(ws []*winState) {
	inWin0 := false
	for _, w := range ws {
		if w == &k.win0 {
			inWin0 = true
			break
		}
	}
	if inWin0 {
		k.bits |= keyWin0
	} else {
		k.bits &^= keyWin0
	}
	if len(ws) == 0 || (len(ws) == 1 && inWin0) {
		if k.x != nil {
			k.x.more = nil
		}
		return
	}
	if k.x == nil {
		k.x = &aggKeyExtra{}
	}
	k.x.more = ws
}

// newWindow adds window w, with state st, to the key's windows: in win0
// when it is free, else in a window of its own.
func (k *aggKey) newWindow(w window.Window, st window.State) *winState {
	if k.bits&(keyWin0|keySpent) == 0 {
		k.win0 = winState{w: w, st: st}
		if k.nwin() == 0 {
			k.bits |= keyWin0
		} else {
			k.setWindows(append(k.x.more, &k.win0))
		}
		return &k.win0
	}
	ws := &winState{w: w, st: st}
	switch {
	case k.x != nil && k.x.more != nil:
		// win0 stays in the list or out of it as it was.
		k.x.more = append(k.x.more, ws)
	case k.bits&keyWin0 != 0:
		k.setWindows([]*winState{&k.win0, ws})
	default:
		k.setWindows([]*winState{ws})
	}
	return ws
}

// removeWindow removes ws, one of the key's windows. Its memory is not
// given to another window while the node may still point at it: windows
// are removed when they are evaluated (after a bundle, or by a timer),
// and win0 goes to a new window only through a later element's
// newWindow, once the lists that point at windows were emptied; a
// merging step, whose windows merge away while a bundle runs, never
// gives win0 again once its window merged away (keySpent).
func (k *aggKey) removeWindow(ws *winState) {
	if k.x == nil || k.x.more == nil {
		if ws == &k.win0 {
			k.bits &^= keyWin0
		}
		return
	}
	more := k.x.more
	for i, c := range more {
		if c == ws {
			copy(more[i:], more[i+1:])
			more[len(more)-1] = nil
			k.setWindows(more[:len(more)-1])
			return
		}
	}
}

// compact moves the key's one window into win0 when win0 is free, so
// that a key whose windows follow one another (fixed windows: the next
// one opens before the last one closes) is one object again once the
// earlier window closed, not the key, its extra record and a window.
// It is called for an element's key before the element touches its
// windows: a window that is queued or held (st.Marks) may be pointed at
// from the node's lists, and stays where it is.
func (k *aggKey) compact() {
	x := k.x
	if x == nil || len(x.more) != 1 || k.bits&(keyWin0|keySpent) != 0 {
		return
	}
	ws := x.more[0]
	if ws.st.Marks() != 0 {
		return
	}
	k.win0 = *ws
	k.bits |= keyWin0
	x.more = nil
	if x.long == "" && x.key == nil {
		k.x = nil
	}
}

// window returns the key's window w, or nil. It runs per element: a key
// with its one window in win0 is one comparison.
func (k *aggKey) window(w window.Window) *winState {
	if x := k.x; x != nil && x.more != nil {
		for _, c := range x.more {
			if c.w == w {
				return c
			}
		}
		return nil
	}
	if k.bits&keyWin0 != 0 && k.win0.w == w {
		return &k.win0
	}
	return nil
}

func (k *aggKey) has(ws *winState) bool {
	for i := range k.nwin() {
		if k.win(i) == ws {
			return true
		}
	}
	return false
}
