package runner

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unique"

	"github.com/weir-dev/weir/runner/contract"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/window"
)

// This file encodes and decodes the keyed state of one key, as
// checkpoints store it: an aggregation's windows, trigger states and
// accumulators; a stateful step's cells and timers.

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func readBytes(b []byte) (field, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return nil, nil, fmt.Errorf("corrupt state entry")
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

func appendWindow(dst []byte, w window.Window) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(w.Start))
	return binary.BigEndian.AppendUint64(dst, uint64(w.End))
}

func readWindow(b []byte) (window.Window, []byte, error) {
	if len(b) < 16 {
		return window.Window{}, nil, fmt.Errorf("corrupt state entry")
	}
	return window.Window{Start: mtime.Time(binary.BigEndian.Uint64(b)), End: mtime.Time(binary.BigEndian.Uint64(b[8:]))}, b[16:], nil
}

// appendAggKey appends the encoding of the windows of one key of an
// aggregation to out: the key, then per window its bounds, trigger state
// and accumulator, each encoding length-prefixed.
func appendAggKey(out []byte, sc contract.StateCoder, ek contract.EncodedKeyer, k *aggKey) ([]byte, error) {
	out, err := appendPrefixed(out, func(b []byte) ([]byte, error) { return appendAggKeyOnly(b, sc, ek, k) })
	if err != nil {
		return nil, fmt.Errorf("encoding key: %w", err)
	}
	out = binary.AppendUvarint(out, uint64(k.nwin()))
	for i := range k.nwin() {
		ws := k.win(i)
		out = appendWindow(out, ws.w)
		out = ws.st.AppendBinary(out)
		if ws.acc == nil {
			out = append(out, 0)
			continue
		}
		out = append(out, 1)
		out, err = appendPrefixed(out, func(b []byte) ([]byte, error) { return appendAggAcc(b, sc, ek, k, ws.acc) })
		if err != nil {
			return nil, fmt.Errorf("encoding accumulator: %w", err)
		}
	}
	return out, nil
}

// appendAggKeyOnly appends the StateCoder encoding of k's key: from its
// encoding when the node keeps only that (a nil key, ek set: see
// EncodedKeyer), to the same bytes.
func appendAggKeyOnly(b []byte, sc contract.StateCoder, ek contract.EncodedKeyer, k *aggKey) ([]byte, error) {
	if k.val() == nil && ek != nil {
		return ek.AppendEncodedKeyFrom(b, k.enc())
	}
	if sa, ok := sc.(contract.StateAppender); ok {
		return sa.AppendEncodedKey(b, k.val())
	}
	kb, err := sc.EncodeKey(k.val())
	return append(b, kb...), err
}

// appendAggAcc appends the StateCoder encoding of accumulator acc of k.
func appendAggAcc(b []byte, sc contract.StateCoder, ek contract.EncodedKeyer, k *aggKey, acc any) ([]byte, error) {
	if k.val() == nil && ek != nil {
		return ek.AppendEncodedStateFor(b, k.enc(), contract.AccumulatorCell, acc)
	}
	if sa, ok := sc.(contract.StateAppender); ok {
		return sa.AppendEncodedState(b, contract.AccumulatorCell, acc)
	}
	ab, err := sc.EncodeState(contract.AccumulatorCell, acc)
	return append(b, ab...), err
}

// appendPrefixed appends what enc appends, preceded by its length as
// appendBytes writes it, without a separate buffer.
func appendPrefixed(out []byte, enc func([]byte) ([]byte, error)) ([]byte, error) {
	start := len(out)
	out, err := enc(out)
	if err != nil {
		return out, err
	}
	n := len(out) - start
	var hdr [binary.MaxVarintLen64]byte
	h := binary.PutUvarint(hdr[:], uint64(n))
	out = append(out, hdr[:h]...)
	copy(out[start+h:], out[start:start+n])
	copy(out[start:], hdr[:h])
	return out, nil
}

// decodeAggKey decodes what appendAggKey wrote. With lazy set the key is
// not decoded (the caller sets the key's encoding: see EncodedKeyer).
func decodeAggKey(sc contract.StateCoder, b []byte, lazy bool) (*aggKey, []byte, []droppedState, error) {
	kb, b, err := readBytes(b)
	if err != nil {
		return nil, nil, nil, err
	}
	k := &aggKey{}
	var dropped []droppedState
	if !lazy {
		key, err := sc.DecodeKey(kb)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("decoding key: %w", err)
		}
		k.setVal(key)
	}
	n, m := binary.Uvarint(b)
	if m <= 0 {
		return nil, nil, nil, fmt.Errorf("corrupt state entry")
	}
	b = b[m:]
	for i := uint64(0); i < n; i++ {
		w, rest, err := readWindow(b)
		if err != nil {
			return nil, nil, nil, err
		}
		b = rest
		ws := k.newWindow(w, window.State{})
		if b, err = ws.st.DecodeBinary(b); err != nil {
			return nil, nil, nil, fmt.Errorf("decoding trigger state: %w", err)
		}
		if len(b) == 0 {
			return nil, nil, nil, fmt.Errorf("corrupt state entry")
		}
		has := b[0]
		b = b[1:]
		if has == 1 {
			var acc []byte
			if acc, b, err = readBytes(b); err != nil {
				return nil, nil, nil, err
			}
			ws.acc, err = sc.DecodeState(contract.AccumulatorCell, acc)
			var partial *contract.PartialStateError
			switch {
			case errors.As(err, &partial):
				dropped = append(dropped, droppedState{win: w, cell: contract.AccumulatorCell, reason: partial.Reason, stored: bytes.Clone(acc), err: err})
			case err != nil:
				return nil, nil, nil, fmt.Errorf("decoding accumulator: %w", err)
			}
		}
	}
	return k, kb, dropped, nil
}

// encodeSfKey encodes the windows of one key of a stateful step: value
// cells, bags, maps and timers.
func encodeSfKey(sc contract.StateCoder, k *sfKey) ([]byte, error) {
	return appendSfKey(nil, sc, k)
}

// appendSfKey appends the encoding of encodeSfKey to out.
func appendSfKey(out []byte, sc contract.StateCoder, k *sfKey) ([]byte, error) {
	kb, err := sc.EncodeKey(k.key)
	if err != nil {
		return nil, fmt.Errorf("encoding key: %w", err)
	}
	out = appendBytes(out, kb)
	out = binary.AppendUvarint(out, uint64(k.nwins()))
	enc := func(cell string, v any) error {
		b, err := sc.EncodeState(cell, v)
		if err != nil {
			return fmt.Errorf("encoding state: %w", err)
		}
		out = appendBytes(out, b)
		return nil
	}
	for i := range k.nwins() {
		ws := k.winAt(i)
		out = appendWindow(out, ws.w)
		out = binary.AppendUvarint(out, uint64(len(ws.values)))
		for _, c := range ws.values { // ordered by id
			out = appendBytes(out, []byte(c.id))
			if err := enc(c.id, c.v); err != nil {
				return nil, err
			}
		}
		bags := ws.bags()
		out = binary.AppendUvarint(out, uint64(len(bags)))
		for _, c := range bags { // ordered by id, as all cells are
			out = appendBytes(out, []byte(c.id))
			out = binary.AppendUvarint(out, uint64(len(c.v)))
			for _, v := range c.v {
				if err := enc(c.id, v); err != nil {
					return nil, err
				}
			}
		}
		maps := ws.maps()
		out = binary.AppendUvarint(out, uint64(len(maps)))
		for _, c := range maps {
			id, m := c.id, c.v
			out = appendBytes(out, []byte(id))
			out = binary.AppendUvarint(out, uint64(len(m)))
			// In the order of the entries' encoded keys, not the map's
			// random order: a key's encoding is the same every time.
			type entry struct{ k, v []byte }
			es := make([]entry, 0, len(m))
			for mk, mv := range m {
				kb, err := sc.EncodeState(id+"#key", mk)
				if err != nil {
					return nil, fmt.Errorf("encoding state: %w", err)
				}
				vb, err := sc.EncodeState(id+"#value", mv)
				if err != nil {
					return nil, fmt.Errorf("encoding state: %w", err)
				}
				es = append(es, entry{kb, vb})
			}
			slices.SortFunc(es, func(a, b entry) int { return bytes.Compare(a.k, b.k) })
			for _, e := range es {
				out = appendBytes(appendBytes(out, e.k), e.v)
			}
		}
		timers := ws.timers()
		out = binary.AppendUvarint(out, uint64(len(timers)))
		for _, c := range timers {
			t := c.v
			out = appendBytes(out, []byte(c.id))
			out = appendBytes(out, []byte(t.Domain))
			out = binary.BigEndian.AppendUint64(out, uint64(t.Time))
		}
	}
	return out, nil
}

// stateDecoder reads what encodeSfKey wrote.
type stateDecoder struct {
	b   []byte
	sc  contract.StateCoder
	err error
	// win is the window whose cells are being decoded.
	win window.Window
	// dropped lists the stored values the step's code dropped.
	dropped []droppedState
}

// id reads a cell's id. A key's cells share their ids' strings with
// every other key's (unique.Make) instead of holding a copy each (16 bytes
// a cell): a restore reads the same few ids for millions of keys, on
// several goroutines at once.
func (d *stateDecoder) id() string {
	return unique.Make(string(d.bytes())).Value()
}

// droppedState is a stored state value the step's code refused to carry
// over (contract.ErrStateDropped): the restore leaves it out and reports it.
type droppedState struct {
	win    window.Window
	cell   string
	reason string
	// mapKey is the entry's key when the value was a map cell's.
	mapKey any
	stored []byte
	err    error
}

func (d *stateDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	n, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.err = fmt.Errorf("corrupt state entry")
		return 0
	}
	d.b = d.b[k:]
	return n
}

func (d *stateDecoder) bytes() []byte {
	if d.err != nil {
		return nil
	}
	var f []byte
	f, d.b, d.err = readBytes(d.b)
	return f
}

// value decodes one stored value of cell; ok is false when the step's
// code dropped it (contract.ErrStateDropped) or decoding failed (d.err).
func (d *stateDecoder) value(cell string) (v any, ok bool) {
	b := d.bytes()
	if d.err != nil {
		return nil, false
	}
	v, err := d.sc.DecodeState(cell, b)
	switch {
	case errors.Is(err, contract.ErrStateDropped):
		d.dropped = append(d.dropped, droppedState{win: d.win, cell: cell, reason: contract.ReasonStateMigrationFailed, stored: bytes.Clone(b), err: err})
		return nil, false
	case err != nil:
		d.err = fmt.Errorf("decoding state: %w", err)
		return nil, false
	}
	return v, true
}

// decodeSfKey reads what encodeSfKey wrote. It also returns the stored
// values the step's code dropped, which the key holds no more.
func decodeSfKey(sc contract.StateCoder, b []byte) (*sfKey, []droppedState, error) {
	d := &stateDecoder{b: b, sc: sc}
	kb := d.bytes()
	if d.err != nil {
		return nil, nil, d.err
	}
	key, err := sc.DecodeKey(kb)
	if err != nil {
		return nil, nil, fmt.Errorf("decoding key: %w", err)
	}
	k := &sfKey{key: key}
	nw := d.uvarint()
	for i := uint64(0); i < nw && d.err == nil; i++ {
		ws := &sfWin{}
		if ws.w, d.b, d.err = readWindow(d.b); d.err != nil {
			break
		}
		d.win = ws.w
		if n := d.uvarint(); n > 0 {
			ws.values = make(cells[any], 0, min(n, 8))
			for j := uint64(0); j < n && d.err == nil; j++ {
				id := d.id()
				if v, ok := d.value(id); ok {
					ws.values.set(id, v)
				}
			}
		}
		if n := d.uvarint(); n > 0 {
			for j := uint64(0); j < n && d.err == nil; j++ {
				id := d.id()
				m := d.uvarint()
				var bag []any
				for x := uint64(0); x < m && d.err == nil; x++ {
					if v, ok := d.value(id); ok {
						bag = append(bag, v)
					}
				}
				if len(bag) > 0 {
					ws.extra().bags.set(id, bag)
				}
			}
		}
		if n := d.uvarint(); n > 0 {
			for j := uint64(0); j < n && d.err == nil; j++ {
				id := d.id()
				m := d.uvarint()
				entries := map[any]any{}
				ws.extra().maps.set(id, entries)
				for x := uint64(0); x < m && d.err == nil; x++ {
					mk, kok := d.value(id + "#key")
					mv, vok := d.value(id + "#value")
					switch {
					case kok && vok:
						entries[mk] = mv
					case kok && len(d.dropped) > 0:
						d.dropped[len(d.dropped)-1].mapKey = mk
					}
				}
			}
		}
		if n := d.uvarint(); n > 0 {
			for j := uint64(0); j < n && d.err == nil; j++ {
				id := d.id()
				dom := d.id()
				if d.err == nil && len(d.b) < 8 {
					d.err = fmt.Errorf("corrupt state entry")
				}
				if d.err != nil {
					break
				}
				t := mtime.Time(binary.BigEndian.Uint64(d.b))
				d.b = d.b[8:]
				ws.extra().timers.set(id, contract.Timer{ID: id, Domain: graph.TimeDomain(dom), Time: t})
			}
		}
		k.addWin(ws)
	}
	if d.err != nil {
		return nil, nil, d.err
	}
	return k, d.dropped, nil
}

// AggregationWindows returns how many windows one stored key of an
// aggregation (a combine or GroupByKey step) holds open, from the value
// its checkpoint stored, without decoding the key or the accumulators; ok
// is false when the value is not an aggregation's.
func AggregationWindows(value []byte) (n int, ok bool) {
	_, rest, err := readBytes(value)
	if err != nil {
		return 0, false
	}
	c, m := binary.Uvarint(rest)
	if m <= 0 || c > uint64(len(rest)) {
		return 0, false
	}
	return int(c), true
}
