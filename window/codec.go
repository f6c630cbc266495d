package window

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/weir-dev/weir/mtime"
)

// errCorrupt is returned when a State encoding is truncated or malformed.
var errCorrupt = errors.New("corrupt window state encoding")

// State flags in the compact encoding.
const (
	flagNewData byte = 1 << iota
	flagHasData
	flagNonEarlyFired
	flagClosed
)

// Trigger state flags.
const (
	tflagFinished byte = 1 << iota
	tflagOnTimeFired
)

// AppendBinary appends a compact encoding of st (a few bytes for the
// common triggers), for checkpoints that hold one State per key and window.
func (st *State) AppendBinary(dst []byte) []byte {
	dst = append(dst, st.Trigger.win)
	dst = binary.AppendVarint(dst, st.NextIndex)
	return st.Trigger.appendBinary(dst)
}

func (t *TriggerState) appendBinary(dst []byte) []byte {
	var f byte
	if t.Finished {
		f |= tflagFinished
	}
	if t.OnTimeFired {
		f |= tflagOnTimeFired
	}
	dst = append(dst, f)
	dst = binary.AppendVarint(dst, int64(t.Count))
	dst = binary.AppendVarint(dst, int64(t.Deadline()))
	sub := t.Subs()
	dst = binary.AppendUvarint(dst, uint64(len(sub)))
	for i := range sub {
		dst = sub[i].appendBinary(dst)
	}
	return dst
}

// DecodeBinary reads what AppendBinary wrote and returns the rest of b.
func (st *State) DecodeBinary(b []byte) ([]byte, error) {
	if len(b) < 1 {
		return nil, errCorrupt
	}
	f := b[0] & (flagNewData | flagHasData | flagNonEarlyFired | flagClosed)
	n, k := binary.Varint(b[1:])
	if k <= 0 {
		return nil, errCorrupt
	}
	st.NextIndex = n
	rest, err := st.Trigger.decodeBinary(b[1+k:], 0)
	st.Trigger.win = f
	return rest, err
}

func (t *TriggerState) decodeBinary(b []byte, depth int) ([]byte, error) {
	if len(b) < 1 || depth > 64 {
		return nil, errCorrupt
	}
	f := b[0]
	t.Finished, t.OnTimeFired = f&tflagFinished != 0, f&tflagOnTimeFired != 0
	b = b[1:]
	c, k := binary.Varint(b)
	if k <= 0 {
		return nil, errCorrupt
	}
	// Clamped as OnElement counts (a state stored before the count
	// became 32 bits may hold more).
	t.Count, b = int32(max(math.MinInt32, min(c, math.MaxInt32))), b[k:]
	d, k := binary.Varint(b)
	if k <= 0 {
		return nil, errCorrupt
	}
	t.x, b = nil, b[k:]
	t.setDeadline(mtime.Time(d))
	ns, k := binary.Uvarint(b)
	if k <= 0 || ns > uint64(len(b)) {
		return nil, errCorrupt
	}
	b = b[k:]
	if ns == 0 {
		return b, nil
	}
	sub := make([]TriggerState, ns)
	var err error
	for i := range sub {
		if b, err = sub[i].decodeBinary(b, depth+1); err != nil {
			return nil, err
		}
	}
	t.setSubs(sub)
	return b, nil
}
