package weir

import (
	"fmt"
	"strconv"
)

// This file lets a CombinePerKey keep its keys as their encodings only
// (contract.EncodedKeyer): for string, int64 and int keys, whose
// keyAppender encodings read back exactly, the runner then holds no boxed
// copy of each key, and a restore does not decode them. The key is
// decoded when a pane is emitted.

// keyReader returns the function that reads a key of type K back from its
// keyAppender encoding, or nil when K's encoding is not read back here
// (every type but string, int64 and int, and any KeyEncoder).
func keyReader[K comparable]() func(enc string) (K, error) {
	var zero K
	if _, ok := any(zero).(KeyEncoder); ok {
		return nil
	}
	switch any(zero).(type) {
	case string:
		return func(enc string) (K, error) { return any(enc).(K), nil }
	case int64:
		return func(enc string) (K, error) {
			n, err := readUint64(enc)
			return any(int64(n)).(K), err
		}
	case int:
		return func(enc string) (K, error) {
			n, err := readUint64(enc)
			return any(int(n)).(K), err
		}
	}
	return nil
}

// readUint64 reads the 8-byte big-endian encoding keyAppender writes for
// integers.
func readUint64(enc string) (uint64, error) {
	if len(enc) != 8 {
		return 0, fmt.Errorf("an integer key's encoding is 8 bytes, not %d", len(enc))
	}
	var n uint64
	for i := range 8 {
		n = n<<8 | uint64(enc[i])
	}
	return n, nil
}

// KeysFromEncoding implements contract.EncodedKeyer: the step keeps keys
// as their encodings when they read back and no re-key is declared (a
// re-key reads stored keys of another type).
func (c *combineAgg[K, V, A, O]) KeysFromEncoding() bool {
	return c.readKey != nil && c.rekey == nil
}

// KeyFromEncoding implements contract.EncodedKeyer.
func (c *combineAgg[K, V, A, O]) KeyFromEncoding(enc string) (any, error) {
	k, err := c.readKey(enc)
	if err != nil {
		return nil, err
	}
	return k, nil
}

// AppendEncodedKeyFrom implements contract.EncodedKeyer: the bytes
// AppendEncodedKey writes for the key, without boxing it.
func (c *combineAgg[K, V, A, O]) AppendEncodedKeyFrom(dst []byte, enc string) ([]byte, error) {
	dst = append(dst, c.mark...)
	k, err := c.readKey(enc)
	if err != nil {
		return nil, err
	}
	switch x := any(k).(type) {
	case string:
		return append(append(dst, 's'), x...), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	}
	return appendJSON(dst, k)
}

// AppendEncodedStateFor implements contract.EncodedKeyer: a combine's
// stored accumulator does not hold its key.
func (c *combineAgg[K, V, A, O]) AppendEncodedStateFor(dst []byte, _, cell string, v any) ([]byte, error) {
	return c.AppendEncodedState(dst, cell, v)
}
