package runner

// This file restores an aggregation's keys with several goroutines
// (restoreparts.go).

import "bytes"

// decodedKey is a key a restoring goroutine decoded, and, for the few
// whose state did not all decode, what the worker reports of it
// (restored).
type decodedKey struct {
	k    *aggKey
	drop *restoredDrop
}

// restoredDrop is what of a restored key's state did not decode: its key
// as the state coder stored it (a copy: the store lends its buffers) and
// what was dropped.
type restoredDrop struct {
	kb      []byte
	dropped []droppedState
}

// decodeRestored decodes one key of a checkpoint (restoreInParts's decode).
func (n *aggNode) decodeRestored(kg uint16, key, value []byte) (decodedKey, error) {
	k, kb, dropped, err := decodeAggKey(n.sc, value, n.ek != nil)
	if err != nil {
		return decodedKey{}, err
	}
	k.setEncoding(key)
	k.kg = kg
	r := decodedKey{k: k}
	if len(dropped) > 0 {
		r.drop = &restoredDrop{kb: bytes.Clone(kb), dropped: dropped}
	}
	return r, nil
}

// applyRestored puts b's keys into their key group, sized for them at
// once instead of growing the table a doubling at a time, and does for
// each what follows its addition (restored).
func (n *aggNode) applyRestored(b restoreBatch[decodedKey]) error {
	grp := n.group(b.kg)
	grp.reserve(grp.n + len(b.items))
	for _, r := range b.items {
		grp.add(r.k)
	}
	for _, r := range b.items {
		var kb []byte
		var dropped []droppedState
		if r.drop != nil {
			kb, dropped = r.drop.kb, r.drop.dropped
		}
		if err := n.restored(b.kg, r.k, kb, dropped); err != nil {
			return err
		}
	}
	return nil
}
