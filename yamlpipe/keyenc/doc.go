// Package keyenc is the tagged value encoding of grouping keys and
// accumulator state: Combine's group_by values, Join's and Sql's window
// keys. Each value is a tag byte and its bytes (8 big-endian bytes for
// integers, floats and event times; a uvarint length and the bytes for
// strings and, as JSON text, for other values), so equal values encode to
// equal bytes and a key's encoding is a map key. Checkpoints persist keys
// and accumulators in this encoding: it may only grow new tags, never
// change what an existing tag means.
//
// It may import mtime, row and the standard library.
package keyenc
