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

// rekeyer is the declared re-key (RekeyFrom) of a keyed step's
// aggregation (CombinePerKey, GroupByKey), as its contract.Rekeyer; the
// zero value declares none.
type rekeyer[K comparable] struct {
	// rekey is the declared re-key; nil for none.
	rekey *keyMigration
	// appendNew encodes a new key as the step does (kvKeyer's appendKey).
	appendNew func([]byte, K) []byte
}

var (
	_ contract.Rekeyer = (*combineAgg[string, int64, int64, int64])(nil)
	_ contract.Rekeyer = (*gbkAgg[string, int64])(nil)
)

// declareRekey sets the re-key m (nil: none) of a step keyed by K, whose
// keys the step encodes with app, and sets mark, the prefix of the keys
// the step then stores (kvKeyer.mark); kind names the step in the error
// of a re-key to another type than K.
func (r *rekeyer[K]) declareRekey(m *keyMigration, app func([]byte, K) []byte, mark *[]byte, kind string) error {
	if m == nil {
		return nil
	}
	if want := reflect.TypeFor[K](); m.to != want {
		return fmt.Errorf("RekeyFrom gives a %s, but the %s's key is a %s", m.to, kind, want)
	}
	m.mark = contract.RekeyMark(CoderOf[K]().String())
	r.rekey, r.appendNew, *mark = m, app, m.mark
	return nil
}

// RekeysState implements contract.Rekeyer.
func (r *rekeyer[K]) RekeysState() bool { return r.rekey != nil }

// CurrentKey implements contract.Rekeyer: kb carries this version's mark.
func (r *rekeyer[K]) CurrentKey(kb []byte) bool {
	return r.rekey == nil || bytes.HasPrefix(kb, r.rekey.mark)
}

// Rekey implements contract.Rekeyer. The state of stored keys that meet
// at one new key merges window by window (a combine's MergeAccumulators,
// a GroupByKey's values joined), as the step of the new key from scratch
// would have held it.
func (r *rekeyer[K]) Rekey(dst, kb []byte, _ string) ([]byte, any, any, error) {
	key, old, err := r.rekey.convert(kb)
	if err != nil {
		r.rekey.failed.Add(1)
		return dst, nil, old, err
	}
	k := key.(K)
	return r.appendNew(dst, k), k, old, nil
}

// rekeyRejects adds to out (made when nil) the stored keys that did not
// move, reason contract.RekeyFailed; out as it was when none failed.
func (r *rekeyer[K]) rekeyRejects(out map[string]int64) map[string]int64 {
	if r.rekey == nil {
		return out
	}
	if n := r.rekey.failed.Load(); n > 0 {
		if out == nil {
			out = map[string]int64{}
		}
		out[contract.RekeyFailed] = n
	}
	return out
}

// StateRejects implements contract.StateRejecter: the stored keys that
// did not move (RekeyFrom).
func (g *gbkAgg[K, V]) StateRejects() map[string]int64 { return g.rekeyRejects(nil) }
