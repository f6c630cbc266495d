package iceberg

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ipcTestStreams are two Arrow IPC streams: a schema with a nested
// struct, a list, a dictionary-encoded column, a union, a time zone and
// metadata, and partRecord's rows (a schema and a record batch): every
// kind of table, vector and string the check follows.
func ipcTestStreams(t *testing.T) [][]byte {
	t.Helper()
	rec := partRecord(t, 20)
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	md := arrow.NewMetadata([]string{"k"}, []string{"v"})
	nested := arrow.NewSchema([]arrow.Field{
		{Name: "st", Type: arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64},
			arrow.Field{Name: "l", Type: arrow.ListOf(arrow.BinaryTypes.String)},
		), Metadata: md},
		{Name: "dict", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}},
		{Name: "u", Type: arrow.SparseUnionOf([]arrow.Field{{Name: "i", Type: arrow.PrimitiveTypes.Int32}}, []arrow.UnionTypeCode{5})},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "Europe/Paris"}},
	}, &md)
	var sb bytes.Buffer
	ws := ipc.NewWriter(&sb, ipc.WithSchema(nested))
	if err := ws.Close(); err != nil {
		t.Fatal(err)
	}
	return [][]byte{sb.Bytes(), buf.Bytes()}
}

// readIPC reads the stream b with Arrow's reader as a part is read (its
// size limits), recovering its panics.
func readIPC(b []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("panicked")
		}
	}()
	limit := int64(len(b))
	rd, err := ipc.NewReaderFromMessageReader(ipc.NewMessageReader(bytes.NewReader(b), ipc.WithMetadataSizeLimit(limit), ipc.WithBodySizeLimit(limit)), ipc.WithAllocator(memory.NewGoAllocator()))
	if err != nil {
		return err
	}
	defer rd.Release()
	for rd.Next() {
	}
	return rd.Err()
}

// TestIPCCheckDamage: every one-byte change of an Arrow IPC stream either
// is refused by the check or reads without Arrow's reader allocating much
// more than the stream holds (a schema claiming 2^31 children was a fatal
// out-of-memory, and the Parquet reader decodes such a schema from a data
// file's footer).
func TestIPCCheckDamage(t *testing.T) {
	refused, worst, changes := 0, uint64(0), 0
	for _, good := range ipcTestStreams(t) {
		if err := checkIPCStream(good); err != nil {
			t.Fatalf("a valid stream: %v", err)
		}
		if err := readIPC(good); err != nil {
			t.Fatalf("a valid stream does not read: %v", err)
		}
		changes += 6 * len(good)
		for i := range good {
			for _, v := range []byte{0x00, 0x01, 0x40, 0x7f, 0x80, 0xff} {
				if good[i] == v {
					continue
				}
				b := bytes.Clone(good)
				b[i] = v
				if err := checkIPCStream(b); err != nil {
					if !errors.Is(err, errIPCDamaged) {
						t.Fatalf("byte %d set to %#x: %v, not errIPCDamaged", i, v, err)
					}
					refused++
					continue
				}
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				readIPC(b)
				runtime.ReadMemStats(&after)
				if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
					t.Fatalf("byte %d set to %#x passed the check, and the reader allocated %d MiB for a stream of %d bytes", i, v, n>>20, len(b))
				} else {
					worst = max(worst, n)
				}
			}
		}
	}
	if refused == 0 {
		t.Fatal("no change was refused")
	}
	t.Logf("%d of %d changes refused; a read that passed allocated at most %d KiB", refused, changes, worst>>10)
}

// TestIPCCheckRefuses: a field that claims more children than its bytes
// hold, a table pointed at over and over, and a Parquet footer's Arrow
// schema with such a field are refused, saying why.
func TestIPCCheckRefuses(t *testing.T) {
	good := ipcTestStreams(t)[0]
	// The "st" field's children count: a vector of two items, which the
	// check names once it claims 2^31-1.
	children := -1
	for i := 8; i+4 <= len(good); i++ {
		if binary.LittleEndian.Uint32(good[i:]) == 2 && checkIPCStream(withU32(good, i, 1<<31-1)) != nil && strings.Contains(checkIPCStream(withU32(good, i, 1<<31-1)).Error(), "states 2147483647 items") {
			children = i
			break
		}
	}
	if children < 0 {
		t.Fatal("no vector of two items found in the stream")
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"2^31-1 children", checkIPCStream(withU32(good, children, 1<<31-1)), "states 2147483647 items"},
		{"a stream cut within a message", checkIPCStream(good[:20]), "states"},
		{"a Parquet footer's schema", checkArrowSchemaMeta(base64.StdEncoding.EncodeToString(withU32(good, children, 1<<31-1))), "ARROW:schema"},
		{"a part", func() error { _, err := decodeIPCPart(withU32(good, children, 1<<31-1)); return err }(), "states 2147483647 items"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, tc.err, tc.want)
		}
	}
}

func withU32(b []byte, at int, v uint32) []byte {
	b = bytes.Clone(b)
	binary.LittleEndian.PutUint32(b[at:], v)
	return b
}
