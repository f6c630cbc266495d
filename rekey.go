package weir

import (
	"bytes"
	"fmt"
	"reflect"
	"sync/atomic"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/runner/contract"
)

// keyMigration is a step's declared re-key.
type keyMigration struct {
	// from is the identity of the key type re-keyed from.
	from graph.Coder
	// to is the type fn returns, which must be the step's key.
	to reflect.Type
	// convert decodes a stored key of the old type and returns its new
	// key.
	convert func(kb []byte) (key, old any, err error)
	// mark is the contract.RekeyMark of the step's key coder.
	mark []byte
	// failed counts the keys that did not move.
	failed atomic.Int64
}

// RekeyFrom declares, on a CombinePerKey or a GroupByKey, that its key
// changed from type Old (the key the running version stored its state
// under) and how each stored key becomes a new one: when the job restores
// its state (an update in place, a restart, a job from a snapshot), every
// stored key moves to fn's key, and the accumulators of keys that meet
// there are merged with the CombineFn's MergeAccumulators (a GroupByKey's
// values joined), window by window — so a sum per region from sums per
// store is what the new pipeline computes from scratch. A StatefulParDo
// refuses it (its cells and timers have no merge). The compatibility
// check then accepts an update whose key changed (otherwise
// KEY_CODER_CHANGED) with the warning STATE_REKEYED. New must be the
// step's key type. A key fn refuses is left out: counted as the step's
// rejects (reason rekey_failed) and sent to a server job's dead-letter
// topic with the key. What the new version stores is marked
// (contract.RekeyMark), so the declaration may stay on later versions.
//
//	byRegion := weir.CombinePerKey(s, "Totals", keyedByRegion, weir.Sum[int64](),
//		weir.RekeyFrom(func(store StoreKey) (string, error) { return store.Region, nil }))
func RekeyFrom[Old comparable, New comparable](fn func(Old) (New, error)) StepOption {
	from := CoderOf[Old]()
	return func(sc *stepConfig) {
		sc.rekey = &keyMigration{from: from, to: reflect.TypeFor[New](),
			convert: func(kb []byte) (any, any, error) {
				kb = contract.StripRekeyMark(kb) // stored by another re-keying version
				old, err := decodeJSON[Old](kb)
				if err != nil {
					return nil, string(kb), fmt.Errorf("reading the stored key as %s: %w", reflect.TypeFor[Old](), err)
				}
				n, err := fn(old)
				return n, old, err
			}}
	}
}

var (
	_ contract.Rekeyer = (*combineAgg[string, int64, int64, int64])(nil)
	_ contract.Rekeyer = (*gbkAgg[string, int64])(nil)
)

// RekeysState implements contract.Rekeyer.
func (g *gbkAgg[K, V]) RekeysState() bool { return g.rekey != nil }

// CurrentKey implements contract.Rekeyer: kb carries this version's mark.
func (g *gbkAgg[K, V]) CurrentKey(kb []byte) bool {
	return g.rekey == nil || bytes.HasPrefix(kb, g.rekey.mark)
}

// Rekey implements contract.Rekeyer. The values of stored keys that meet
// at one new key are joined, window by window (MergeAccumulators), as a
// GroupByKey of the new key from scratch would have grouped them.
func (g *gbkAgg[K, V]) Rekey(dst, kb []byte, _ string) ([]byte, any, any, error) {
	key, old, err := g.rekey.convert(kb)
	if err != nil {
		g.rekey.failed.Add(1)
		return dst, nil, old, err
	}
	k := key.(K)
	return g.appendKey(dst, k), k, old, nil
}

// StateRejects implements contract.StateRejecter: the stored keys that
// did not move (RekeyFrom).
func (g *gbkAgg[K, V]) StateRejects() map[string]int64 {
	if g.rekey == nil {
		return nil
	}
	if n := g.rekey.failed.Load(); n > 0 {
		return map[string]int64{contract.RekeyFailed: n}
	}
	return nil
}

// RekeysState implements contract.Rekeyer.
func (c *combineAgg[K, V, A, O]) RekeysState() bool { return c.rekey != nil }

// CurrentKey implements contract.Rekeyer: kb carries this version's mark.
func (c *combineAgg[K, V, A, O]) CurrentKey(kb []byte) bool {
	return c.rekey == nil || bytes.HasPrefix(kb, c.rekey.mark)
}

// Rekey implements contract.Rekeyer.
func (c *combineAgg[K, V, A, O]) Rekey(dst, kb []byte, _ string) ([]byte, any, any, error) {
	key, old, err := c.rekey.convert(kb)
	if err != nil {
		c.rekey.failed.Add(1)
		return dst, nil, old, err
	}
	k := key.(K)
	return c.appendKey(dst, k), k, old, nil
}
