package weir

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"reflect"
	"sync/atomic"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/runner/contract"
)

// keyMark starts the stored key encoding of a step that declares a
// re-key (RekeyFrom), followed by a 32-bit fingerprint of the key's type:
// a byte that starts no JSON and no encoding of the int64 and string fast
// paths, so a restore tells the keys this version stored from those of
// the version it re-keys. Every step strips it when reading a key, so a
// later version that drops the declaration still reads them.
const keyMark = 0xfe

// keyMarkLen is the length of the mark: the byte and the fingerprint.
const keyMarkLen = 5

// keyMigration is a step's declared re-key.
type keyMigration struct {
	// from is the identity of the key type re-keyed from.
	from graph.Coder
	// to is the type fn returns, which must be the step's key.
	to reflect.Type
	// convert decodes a stored key of the old type and returns its new
	// key.
	convert func(kb []byte) (key, old any, err error)
	// mark is keyMark and the fingerprint of the step's key coder.
	mark []byte
	// failed counts the keys that did not move.
	failed atomic.Int64
}

// RekeyFrom declares, on a CombinePerKey, that its key changed from type
// Old (the key the running version stored its state under) and how each
// stored key becomes a new one: when the job restores its state (an
// update in place, a restart, a job from a snapshot), every stored key
// moves to fn's key, and the accumulators of keys that meet there are
// merged with the CombineFn's MergeAccumulators, window by window — so a
// sum per region from sums per store is what the new pipeline computes
// from scratch. The compatibility check then accepts an update whose key
// changed (otherwise KEY_CODER_CHANGED) with the warning STATE_REKEYED. New
// must be the combine's key type. A key fn refuses is left out: counted as
// the step's rejects (reason rekey_failed) and sent to a server job's
// dead-letter topic with the key. What the new version stores is marked,
// so the declaration may stay on later versions.
//
//	byRegion := weir.CombinePerKey(s, "Totals", keyedByRegion, weir.Sum[int64](),
//		weir.RekeyFrom(func(store StoreKey) (string, error) { return store.Region, nil }))
func RekeyFrom[Old comparable, New comparable](fn func(Old) (New, error)) StepOption {
	from := CoderOf[Old]()
	return func(sc *stepConfig) {
		sc.rekey = &keyMigration{from: from, to: reflect.TypeFor[New](),
			convert: func(kb []byte) (any, any, error) {
				if len(kb) >= keyMarkLen && kb[0] == keyMark {
					kb = kb[keyMarkLen:] // stored by another re-keying version
				}
				old, err := decodeJSON[Old](kb)
				if err != nil {
					return nil, string(kb), fmt.Errorf("reading the stored key as %s: %w", reflect.TypeFor[Old](), err)
				}
				n, err := fn(old)
				return n, old, err
			}}
	}
}

// rekeyMark returns the mark of keys stored by a step with key coder k.
func rekeyMark(k graph.Coder) []byte {
	h := fnv.New32a()
	h.Write([]byte(k.String()))
	return binary.BigEndian.AppendUint32([]byte{keyMark}, h.Sum32())
}

var _ contract.Rekeyer = (*combineAgg[string, int64, int64, int64])(nil)

// RekeysState implements contract.Rekeyer.
func (c *combineAgg[K, V, A, O]) RekeysState() bool { return c.rekey != nil }

// CurrentKey implements contract.Rekeyer: kb carries this version's mark.
func (c *combineAgg[K, V, A, O]) CurrentKey(kb []byte) bool {
	return c.rekey == nil || (len(kb) >= keyMarkLen && string(kb[:keyMarkLen]) == string(c.rekey.mark))
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
