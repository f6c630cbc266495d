package pubsub

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// namedKV is a key-value bucket keyed by subscription or snapshot names.
// Names may hold '~', '+' and '%' (as Pub/Sub IDs do), which keys may not:
// those are escaped as '=' and two hex digits ('=' is in no name), so a
// name without them is its own key and buckets written before stay
// readable.
type namedKV struct{ jetstream.KeyValue }

// kvKey is name as a key.
func kvKey(name string) string {
	if !strings.ContainsAny(name, "~+%") {
		return name
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		switch c := name[i]; c {
		case '~', '+', '%':
			fmt.Fprintf(&b, "=%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// fromKVKey undoes kvKey.
func fromKVKey(key string) string {
	if !strings.Contains(key, "=") {
		return key
	}
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		if key[i] == '=' && i+2 < len(key) {
			if c, err := strconv.ParseUint(key[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(c))
				i += 2
				continue
			}
		}
		b.WriteByte(key[i])
	}
	return b.String()
}

// Get implements jetstream.KeyValue for a name.
func (k namedKV) Get(ctx context.Context, name string) (jetstream.KeyValueEntry, error) {
	return k.KeyValue.Get(ctx, kvKey(name))
}

// Put implements jetstream.KeyValue for a name.
func (k namedKV) Put(ctx context.Context, name string, value []byte) (uint64, error) {
	return k.KeyValue.Put(ctx, kvKey(name), value)
}

// Create implements jetstream.KeyValue for a name.
func (k namedKV) Create(ctx context.Context, name string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	return k.KeyValue.Create(ctx, kvKey(name), value, opts...)
}

// Update implements jetstream.KeyValue for a name.
func (k namedKV) Update(ctx context.Context, name string, value []byte, revision uint64) (uint64, error) {
	return k.KeyValue.Update(ctx, kvKey(name), value, revision)
}

// Delete implements jetstream.KeyValue for a name.
func (k namedKV) Delete(ctx context.Context, name string, opts ...jetstream.KVDeleteOpt) error {
	return k.KeyValue.Delete(ctx, kvKey(name), opts...)
}

// Keys implements jetstream.KeyValue: the names of the bucket's keys.
func (k namedKV) Keys(ctx context.Context, opts ...jetstream.WatchOpt) ([]string, error) {
	keys, err := k.KeyValue.Keys(ctx, opts...)
	for i, key := range keys {
		keys[i] = fromKVKey(key)
	}
	return keys, err
}
