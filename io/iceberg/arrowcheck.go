package iceberg

// This file checks Arrow IPC messages before Arrow's reader reads them.
// The reader trusts the flatbuffers a message is made of: a schema whose
// field claims 2^31 children was a fatal out-of-memory (no recover
// survives it) in a few bytes, and a flatbuffer may point many times at
// one table, so a small message can unfold into a vast schema. Two kinds
// of input carry such messages: the Arrow schema a Parquet file keeps in
// its footer (ARROW:schema, which Arrow's Parquet reader, and iceberg-go's
// through it, decodes), and the pre-commit parts the sink wrote before its
// own part format (decodeIPCPart). The check walks every table, vector
// and string a reader follows, by the flatbuffers of Arrow's Message.fbs
// and Schema.fbs, and refuses a message that points outside its bytes,
// nests deeper than ipcMaxDepth, or unfolds into more than the bounds
// below.

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
)

const (
	// ipcMaxDepth bounds the nesting of a schema's fields.
	ipcMaxDepth = 64
	// ipcMaxTables bounds the tables a message unfolds into, counting a
	// table each time it is pointed at.
	ipcMaxTables = 100_000
	// ipcMaxUnfold bounds the bytes of the strings and vectors a message
	// unfolds into, beyond its own bytes (a string pointed at twice counts
	// twice).
	ipcMaxUnfold = 16 << 20
)

// errIPCDamaged says an Arrow IPC message does not hold.
var errIPCDamaged = errors.New("damaged Arrow IPC message")

// The message headers and the field types with vectors or strings of
// their own (Message.fbs, Schema.fbs).
const (
	ipcSchema          = 1
	ipcDictionaryBatch = 2
	ipcRecordBatch     = 3
	ipcTypeTimestamp   = 10
	ipcTypeUnion       = 14
)

// checkArrowSchemaMeta checks the Arrow schema a Parquet file's footer
// keeps (ARROW:schema), base64-encoded as Arrow's writer encodes it. A
// value that is not base64 is left to the reader, which refuses it.
func checkArrowSchemaMeta(v string) error {
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(b) == 0 {
		if b, err = base64.RawStdEncoding.DecodeString(v); err != nil {
			return nil
		}
	}
	if err := checkIPCStream(b); err != nil {
		return fmt.Errorf("its Arrow schema (ARROW:schema): %w", err)
	}
	return nil
}

// checkIPCStream checks the messages of the Arrow IPC stream b: each
// message's length and flatbuffer, and that its body lies within b.
func checkIPCStream(b []byte) error {
	unfold := ipcMaxUnfold + len(b)
	tables := 0
	for pos := 0; pos < len(b); {
		if len(b)-pos < 4 {
			return fmt.Errorf("%w: %d stray bytes at byte %d", errIPCDamaged, len(b)-pos, pos)
		}
		n := binary.LittleEndian.Uint32(b[pos:])
		pos += 4
		if n == 0xffffffff { // the continuation marker
			if len(b)-pos < 4 {
				return fmt.Errorf("%w: the stream ends within a message's length at byte %d", errIPCDamaged, pos)
			}
			n = binary.LittleEndian.Uint32(b[pos:])
			pos += 4
		}
		if n == 0 { // the end of the stream
			return nil
		}
		if int64(n) > int64(len(b)-pos) {
			return fmt.Errorf("%w: a message at byte %d states %d bytes, %d are left", errIPCDamaged, pos, n, len(b)-pos)
		}
		c := fbCheck{b: b[pos : pos+int(n)], unfold: unfold, tables: tables}
		body, err := c.message()
		if err != nil {
			return fmt.Errorf("%w: the message at byte %d: %v", errIPCDamaged, pos, err)
		}
		unfold, tables = c.unfold, c.tables
		pos += int(n)
		if body < 0 || body > int64(len(b)-pos) {
			return fmt.Errorf("%w: the message at byte %d states a body of %d bytes, %d are left", errIPCDamaged, pos, body, len(b)-pos)
		}
		pos += int(body)
	}
	return nil
}

// fbCheck walks the flatbuffer b, checking each position it follows
// against b and counting what it unfolds into.
type fbCheck struct {
	b []byte
	// unfold is the bytes of strings and vectors left to unfold into;
	// tables, the tables visited so far.
	unfold, tables int
}

// fbTable is a table of b: where it is, its vtable, the vtable's and the
// table's sizes.
type fbTable struct{ pos, vt, vtLen, tLen int }

func (c *fbCheck) u16(p int) int { return int(binary.LittleEndian.Uint16(c.b[p:])) }

// table checks the table at pos.
func (c *fbCheck) table(pos int) (fbTable, error) {
	if c.tables++; c.tables > ipcMaxTables {
		return fbTable{}, fmt.Errorf("it unfolds into more than %d tables", ipcMaxTables)
	}
	if pos < 0 || pos > len(c.b)-4 {
		return fbTable{}, fmt.Errorf("a table at byte %d is outside its %d bytes", pos, len(c.b))
	}
	vt := int64(pos) - int64(int32(binary.LittleEndian.Uint32(c.b[pos:])))
	if vt < 0 || vt > int64(len(c.b)-4) {
		return fbTable{}, fmt.Errorf("the table at byte %d has its vtable at byte %d, outside its %d bytes", pos, vt, len(c.b))
	}
	t := fbTable{pos: pos, vt: int(vt), vtLen: c.u16(int(vt)), tLen: c.u16(int(vt) + 2)}
	if t.vtLen < 4 || t.vtLen%2 != 0 || t.vt+t.vtLen > len(c.b) || t.tLen < 4 || t.pos+t.tLen > len(c.b) {
		return fbTable{}, fmt.Errorf("the table at byte %d states a vtable of %d bytes and %d bytes of its own, beyond its %d bytes", pos, t.vtLen, t.tLen, len(c.b))
	}
	return t, nil
}

// field returns the position of field i of t, of size bytes, or 0 when t
// does not have it.
func (c *fbCheck) field(t fbTable, i, size int) (int, error) {
	o := 4 + 2*i
	if o+2 > t.vtLen {
		return 0, nil
	}
	off := c.u16(t.vt + o)
	if off == 0 {
		return 0, nil
	}
	if off < 4 || off+size > t.tLen {
		return 0, fmt.Errorf("field %d of the table at byte %d lies outside the table's %d bytes", i, t.pos, t.tLen)
	}
	return t.pos + off, nil
}

// scalar returns the value of the scalar field i of t, of size 1 or 8
// bytes (0 when absent).
func (c *fbCheck) scalar(t fbTable, i, size int) (int64, error) {
	p, err := c.field(t, i, size)
	if p == 0 || err != nil {
		return 0, err
	}
	if size == 1 {
		return int64(c.b[p]), nil
	}
	return int64(binary.LittleEndian.Uint64(c.b[p:])), nil
}

// ref returns where field i of t points (a table, vector or string), or
// 0 when t does not have it.
func (c *fbCheck) ref(t fbTable, i int) (int, error) {
	p, err := c.field(t, i, 4)
	if p == 0 || err != nil {
		return 0, err
	}
	return c.follow(p)
}

// follow returns where the offset at p points.
func (c *fbCheck) follow(p int) (int, error) {
	to := int64(p) + int64(binary.LittleEndian.Uint32(c.b[p:]))
	if to > int64(len(c.b)-4) {
		return 0, fmt.Errorf("an offset at byte %d points at byte %d, outside its %d bytes", p, to, len(c.b))
	}
	return int(to), nil
}

// vector checks the vector field i of t, of elements of size bytes, and
// returns where its elements start and how many there are.
func (c *fbCheck) vector(t fbTable, i, size int) (start, n int, err error) {
	p, err := c.ref(t, i)
	if p == 0 || err != nil {
		return 0, 0, err
	}
	count := int64(binary.LittleEndian.Uint32(c.b[p:]))
	bytes := count * int64(size)
	if bytes > int64(len(c.b)-p-4) {
		return 0, 0, fmt.Errorf("a vector at byte %d states %d items of %d bytes, beyond its %d bytes", p, count, size, len(c.b))
	}
	if c.unfold -= int(bytes); c.unfold < 0 {
		return 0, 0, fmt.Errorf("it unfolds into more than %d bytes", ipcMaxUnfold)
	}
	return p + 4, int(count), nil
}

// tablesOf checks the vector field i of t, of tables, calling each for
// every one.
func (c *fbCheck) tablesOf(t fbTable, i int, each func(fbTable) error) error {
	start, n, err := c.vector(t, i, 4)
	if err != nil {
		return err
	}
	for k := range n {
		p, err := c.follow(start + 4*k)
		if err != nil {
			return err
		}
		e, err := c.table(p)
		if err != nil {
			return err
		}
		if err := each(e); err != nil {
			return err
		}
	}
	return nil
}

// sub checks the table field i of t with each, when t has it.
func (c *fbCheck) sub(t fbTable, i int, each func(fbTable) error) error {
	p, err := c.ref(t, i)
	if p == 0 || err != nil {
		return err
	}
	s, err := c.table(p)
	if err != nil {
		return err
	}
	return each(s)
}

// message checks a Message and returns its body's length.
func (c *fbCheck) message() (int64, error) {
	if len(c.b) < 4 {
		return 0, fmt.Errorf("%d bytes are too few for a message", len(c.b))
	}
	root, err := c.follow(0)
	if err != nil {
		return 0, err
	}
	m, err := c.table(root)
	if err != nil {
		return 0, err
	}
	typ, err := c.scalar(m, 1, 1)
	if err != nil {
		return 0, err
	}
	body, err := c.scalar(m, 3, 8)
	if err != nil {
		return 0, err
	}
	if err := c.tablesOf(m, 4, c.keyValue); err != nil {
		return 0, err
	}
	var header func(fbTable) error
	switch typ {
	case ipcSchema:
		header = c.schema
	case ipcRecordBatch:
		header = c.recordBatch
	case ipcDictionaryBatch:
		header = func(d fbTable) error { return c.sub(d, 1, c.recordBatch) }
	default:
		return 0, fmt.Errorf("it is a message of type %d, which is not read", typ)
	}
	return body, c.sub(m, 2, header)
}

func (c *fbCheck) keyValue(t fbTable) error {
	if _, _, err := c.vector(t, 0, 1); err != nil {
		return err
	}
	_, _, err := c.vector(t, 1, 1)
	return err
}

func (c *fbCheck) schema(t fbTable) error {
	if err := c.tablesOf(t, 1, func(f fbTable) error { return c.schemaField(f, 0) }); err != nil {
		return err
	}
	if err := c.tablesOf(t, 2, c.keyValue); err != nil {
		return err
	}
	_, _, err := c.vector(t, 3, 8)
	return err
}

// schemaField checks a schema's Field at nesting depth.
func (c *fbCheck) schemaField(t fbTable, depth int) error {
	if depth > ipcMaxDepth {
		return fmt.Errorf("its fields nest deeper than %d", ipcMaxDepth)
	}
	if _, _, err := c.vector(t, 0, 1); err != nil { // name
		return err
	}
	typ, err := c.scalar(t, 2, 1)
	if err != nil {
		return err
	}
	err = c.sub(t, 3, func(ty fbTable) error {
		switch typ {
		case ipcTypeTimestamp: // its time zone
			_, _, err := c.vector(ty, 1, 1)
			return err
		case ipcTypeUnion: // its type IDs
			_, _, err := c.vector(ty, 1, 4)
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = c.sub(t, 4, func(d fbTable) error { // dictionary encoding and its index type
		return c.sub(d, 1, func(fbTable) error { return nil })
	})
	if err != nil {
		return err
	}
	if err := c.tablesOf(t, 5, func(ch fbTable) error { return c.schemaField(ch, depth+1) }); err != nil {
		return err
	}
	return c.tablesOf(t, 6, c.keyValue)
}

func (c *fbCheck) recordBatch(t fbTable) error {
	if _, _, err := c.vector(t, 1, 16); err != nil { // field nodes
		return err
	}
	if _, _, err := c.vector(t, 2, 16); err != nil { // buffers
		return err
	}
	if err := c.sub(t, 3, func(fbTable) error { return nil }); err != nil { // compression
		return err
	}
	_, _, err := c.vector(t, 4, 8) // variadic buffer counts
	return err
}
