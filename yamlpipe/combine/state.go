package combine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/yamlpipe/keyenc"
)

// Combine's state coder: checkpoints persist keys and accumulators in the
// tagged value encoding of AppendKey, so an update that keeps the key fields
// and combine functions reads them back unchanged.

var _ contract.StateCoder = (*Aggregator)(nil)

// EncodeKey encodes the group values returned by Key.
func (a *Aggregator) EncodeKey(key any) ([]byte, error) {
	vals, ok := key.([]any)
	if !ok && key != nil {
		return nil, fmt.Errorf("combine key has type %T, want a list of group values", key)
	}
	var out []byte
	if a.KeyMigration != nil {
		out = append(out, a.KeyMigration.Mark...)
	}
	out = binary.AppendUvarint(out, uint64(len(vals)))
	for _, v := range vals {
		out = keyenc.Append(out, v)
	}
	return out, nil
}

// DecodeKey reads what EncodeKey wrote, of this version or another (a
// re-key's mark is skipped).
func (a *Aggregator) DecodeKey(b []byte) (any, error) {
	b = contract.StripRekeyMark(b)
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		// Every value takes a byte at least: a larger count is damage,
		// not a slice to allocate.
		return nil, fmt.Errorf("corrupt combine key")
	}
	b = b[k:]
	vals := make([]any, n)
	for i := range vals {
		var err error
		if vals[i], b, err = keyenc.Read(b); err != nil {
			return nil, err
		}
	}
	if len(a.Group) == 0 {
		return []any{}, nil
	}
	return vals, nil
}

// EncodeState encodes an accumulator: its group values, then per output its
// running integer, float, count, set flag, event time and value.
func (a *Aggregator) EncodeState(_ string, v any) ([]byte, error) {
	ac, err := a.encodable(v)
	if err != nil {
		return nil, err
	}
	return a.appendSlots(appendGroup(nil, ac.group()), ac), nil
}

// appendGroup appends an accumulator's group values: their count, then
// each as keyenc.Append writes it.
func appendGroup(dst []byte, group []any) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(group)))
	for _, g := range group {
		dst = keyenc.Append(dst, g)
	}
	return dst
}

// The contract.EncodedKeyer of a Combine whose group_by fields are all
// scalars: the key encoding (AppendKey) is each value's tag and bytes,
// which is also how EncodeKey and EncodeState write the group values after
// their count, so both are the count and the encoding, byte for byte what
// they write from the values.
var _ contract.EncodedKeyer = (*Aggregator)(nil)

// KeysFromEncoding reports whether every group_by field is a scalar.
func (a *Aggregator) KeysFromEncoding() bool { return a.ScalarKeys }

// KeyFromEncoding returns the group values encoded in enc (strings share
// enc's memory); an empty enc of a step with group_by is the key of an
// element that is not a row (nil), as Key returns it.
func (a *Aggregator) KeyFromEncoding(enc string) (any, error) {
	if len(a.Group) == 0 {
		return []any{}, nil
	}
	if enc == "" {
		return nil, nil
	}
	vals := make([]any, len(a.Group))
	for i := range vals {
		var err error
		if vals[i], enc, err = keyenc.ReadString(enc); err != nil {
			return nil, err
		}
	}
	if enc != "" {
		return nil, fmt.Errorf("corrupt combine key: %d bytes after its %d values", len(enc), len(a.Group))
	}
	return vals, nil
}

// groupCount is the number of group values of the key encoded in enc.
func (a *Aggregator) groupCount(enc string) int {
	if enc == "" {
		return 0 // not a row: no group values (EncodeKey of a nil key)
	}
	return len(a.Group)
}

// AppendEncodedKeyFrom appends EncodeKey of the key encoded in enc.
func (a *Aggregator) AppendEncodedKeyFrom(dst []byte, enc string) ([]byte, error) {
	if a.KeyMigration != nil {
		dst = append(dst, a.KeyMigration.Mark...)
	}
	dst = binary.AppendUvarint(dst, uint64(a.groupCount(enc)))
	return append(dst, enc...), nil
}

// AppendEncodedStateFor appends EncodeState of the accumulator v of the key
// encoded in enc.
func (a *Aggregator) AppendEncodedStateFor(dst []byte, enc, _ string, v any) ([]byte, error) {
	ac, err := a.encodable(v)
	if err != nil {
		return nil, err
	}
	if g := ac.group(); g != nil { // adopted from an execution that kept them
		dst = appendGroup(dst, g)
	} else {
		dst = binary.AppendUvarint(dst, uint64(a.groupCount(enc)))
		dst = append(dst, enc...)
	}
	return a.appendSlots(dst, ac), nil
}

// appendSlots appends the slots of ac, as EncodeState writes them: per
// slot its integer, float, count, set flag, time and value — the fields a
// slot had before its words took a meaning per fn (slot), each written
// from the word that holds it now (storedWords).
func (a *Aggregator) appendSlots(out []byte, ac accumulator) []byte {
	out = binary.AppendUvarint(out, uint64(len(ac.slots)))
	for k := range ac.slots {
		s := &ac.slots[k]
		i, f, n, set := a.storedWords(k, s)
		out = binary.AppendVarint(out, i)
		out = binary.BigEndian.AppendUint64(out, math.Float64bits(f))
		out = binary.AppendVarint(out, n)
		out = append(out, set)
		out = binary.BigEndian.AppendUint64(out, uint64(s.t()))
		out = keyenc.AppendState(out, s.v())
	}
	return out
}

// slotFn is the fn of slot k: a slot beyond the step's outputs (stored by
// a version with more, about to be dropped) is read as a count.
func (a *Aggregator) slotFn(k int) Fn {
	if k < len(a.Ops) {
		return a.Ops[k].Fn
	}
	return FnCount
}

// storedWords returns the integer, float, count and set flag stored for
// slot k, s.
func (a *Aggregator) storedWords(k int, s *slot) (i int64, f float64, n int64, set byte) {
	switch fn := a.slotFn(k); {
	case fn == FnCount:
		return 0, 0, s.i, 0
	case fn == FnMean:
		return 0, s.f(), s.i, 0
	case fn == FnAll || fn == FnAny:
		return s.i, 0, int64(s.x), 0
	}
	// A sum or a value output: the set flag is written, the count 0.
	if s.isSet() {
		set = 1
	}
	return s.i, s.storedF(), 0, set
}

// setStoredWords sets slot k, s, from the integer, float, count and set
// flag stored for it (storedWords).
func (a *Aggregator) setStoredWords(k int, s *slot, i int64, f float64, n int64, set byte) {
	switch fn := a.slotFn(k); {
	case fn == FnCount:
		s.i = n
	case fn == FnMean:
		s.i = n
		s.setF(f)
	case fn == FnAll || fn == FnAny:
		s.i, s.x = i, uint64(n)
	default:
		s.i = i
		s.setF(f)
		if set == 1 {
			s.markSet()
		}
	}
}

// errCorruptAccumulator is the error of a corrupt stored accumulator, made
// once: DecodeState runs once per key of a restore.
var errCorruptAccumulator = errors.New("corrupt combine accumulator")

// DecodeState reads what EncodeState wrote.
func (a *Aggregator) DecodeState(_ string, b []byte) (any, error) {
	bad := errCorruptAccumulator
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, bad // every key value takes a byte at least
	}
	b = b[k:]
	var group []any
	if n > 0 && !a.ScalarKeys {
		group = make([]any, n)
	}
	var err error
	for i := uint64(0); i < n; i++ {
		if group == nil {
			// Scalar keys are read from the key's encoding when
			// needed (KeyFromEncoding): skip them without decoding.
			if b, err = keyenc.Skip(b); err != nil {
				return nil, err
			}
			continue
		}
		if group[i], b, err = keyenc.Read(b); err != nil {
			return nil, err
		}
	}
	ns, k := binary.Uvarint(b)
	if k <= 0 || ns > uint64(len(a.Ops))+maxDroppedOutputs {
		return nil, fmt.Errorf("combine accumulator has %d outputs, the step has %d", ns, len(a.Ops))
	}
	b = b[k:]
	// An accumulator stored before an update that appended outputs has
	// fewer slots (the new ones start empty: their identity), one stored
	// before the last outputs were removed has more (dropped): the
	// compatibility check lets only such changes through (compat's
	// COMBINE_OUTPUTS_CHANGED).
	// One take for the accumulator's slots, which are (most often) all of
	// it: a restore decodes millions.
	slots := a.accs.takeSlots(max(int(ns), len(a.Ops)))
	for idx := range int(ns) {
		i, k := binary.Varint(b)
		if k <= 0 {
			return nil, bad
		}
		b = b[k:]
		if len(b) < 8 {
			return nil, bad
		}
		f := math.Float64frombits(binary.BigEndian.Uint64(b))
		b = b[8:]
		n, k := binary.Varint(b)
		if k <= 0 {
			return nil, bad
		}
		b = b[k:]
		if len(b) < 9 {
			return nil, bad
		}
		set := b[0]
		if n != 0 {
			// A sum or a value output whose stored count is not zero is
			// set, as the slot with a count of its own read it.
			set = 1
		}
		t := mtime.Time(binary.BigEndian.Uint64(b[1:]))
		b = b[9:]
		var v any
		if v, b, err = keyenc.Read(b); err != nil {
			return nil, err
		}
		s := &slots[idx]
		s.setVT(v, t)
		a.setStoredWords(idx, s, i, f, n, set)
	}
	ac := accumulator{slots: slots[:len(a.Ops)]}
	ac.setGroup(group)
	acc := a.accs.wrap(nil, ac)
	if int(ns) < len(a.Ops) {
		if failed := a.initSlots(ac, int(ns)); failed != "" {
			// The accumulator is kept; the runner reports the key and window.
			return acc, &contract.PartialStateError{Reason: MigrationInitFailed, Message: failed}
		}
	}
	return acc, nil
}

// maxDroppedOutputs bounds the slots a stored accumulator may have beyond
// the step's outputs (a corrupt count is refused, not allocated).
const maxDroppedOutputs = 64

// conform returns the accumulator acc holds with the step's outputs as
// its slots, and the form the runner is to hold of it: an accumulator
// adopted from an execution whose combine had fewer outputs (appended
// since) gets empty slots for the new ones (their inits' values, when the
// migration declares inits), one whose combine had more (the last ones
// removed) loses them. The common case costs one comparison. A value acc
// is not an accumulator of is a defect of the runner: it panics, as a
// failed type assertion would.
func (a *Aggregator) conform(acc any) (accumulator, any) {
	ac, ok := open(acc)
	if !ok {
		panic(fmt.Sprintf("combine accumulator has type %T", acc))
	}
	if len(ac.slots) == len(a.Ops) {
		return ac, acc
	}
	return a.conformSlots(acc, ac)
}

// encodable is conform for a checkpoint's encoding, which reports a value
// that is not an accumulator as an error.
func (a *Aggregator) encodable(v any) (accumulator, error) {
	if _, ok := open(v); !ok {
		return accumulator{}, fmt.Errorf("combine accumulator has type %T", v)
	}
	ac, _ := a.conform(v)
	return ac, nil
}

// conformSlots is conform's work for an accumulator ac (held as orig)
// whose slots are not the step's outputs.
//
// A compact accumulator cannot grow where it is: its slots are a new
// array, and the runner holds the new form only once it stores what a
// call returned (AddInputErr, MergeAccumulators do; Output and the
// checkpoint's encoding do not). Slots without an init start empty each
// time alike; where an init applies, the first carried-over form is kept
// (Migrations.carry) so that its init is evaluated, and a failure
// reported, once.
func (a *Aggregator) conformSlots(orig any, ac accumulator) (accumulator, any) {
	if len(ac.slots) > len(a.Ops) {
		ac.slots = ac.slots[:len(a.Ops)]
		return ac, a.accs.wrap(orig, ac)
	}
	m := a.Migrations
	_, header := orig.(*accumulator)
	carried := !header && m.initsFrom(len(ac.slots))
	if carried {
		if out, ok := m.carried(ac.first()); ok {
			cac, _ := open(out)
			return cac, out
		}
	}
	kept, old := len(ac.slots), ac.first()
	slots := a.accs.takeSlots(len(a.Ops))
	copy(slots, ac.slots)
	ac.slots = slots
	out := a.accs.wrap(orig, ac)
	if failed := a.initSlots(ac, kept); failed != "" {
		// An adopted key has no restore to report it: the runner takes it
		// (TakeStateRejects) after this use of the accumulator.
		m.adoptedInitFailed(ac.first(), failed)
	}
	if carried {
		m.carry(old, out)
	}
	return ac, out
}
