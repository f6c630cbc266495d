package iceberg

// This file encodes the rows of a pre-commit part (a worker's rows between
// two checkpoints, stored in the checkpoint until its commit) in a format
// whose every count is bounded by the bytes that hold it: parts come back
// from the state store, and from snapshot files anyone can write. Arrow's
// IPC reader, which parts used before, allocates whatever its flatbuffers
// state (a byte changed in a part was a fatal out-of-memory).
//
//	"WIP1" | uvarint columns | per column: uvarint len(name) | name |
//	  type (1 byte) | [timestamp: unit (1 byte) | uvarint len(zone) | zone] |
//	  nullable (1 byte)
//	uvarint rows | per column: validity bitmap (rows/8 bytes, rounded up;
//	  bit i set: row i has a value) | the values of the rows that have one:
//	  int64, int32, timestamp, date32 as varints; float64 and float32 as
//	  their IEEE bits (8 or 4 bytes, little endian); bool as a byte;
//	  string as uvarint length | bytes

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// partMagic starts a part in this file's format.
const partMagic = "WIP1"

// The column types of a part.
const (
	colInt64 byte = iota + 1
	colBool
	colString
	colLargeString
	colInt32
	colFloat64
	colFloat32
	colTimestamp
	colDate32
)

// simpleCol returns the column type a part names by code alone (nil for
// a timestamp, which also states its unit and zone, and for no type).
func simpleCol(code byte) arrow.DataType {
	switch code {
	case colInt64:
		return arrow.PrimitiveTypes.Int64
	case colBool:
		return arrow.FixedWidthTypes.Boolean
	case colString:
		return arrow.BinaryTypes.String
	case colLargeString:
		return arrow.BinaryTypes.LargeString
	case colInt32:
		return arrow.PrimitiveTypes.Int32
	case colFloat64:
		return arrow.PrimitiveTypes.Float64
	case colFloat32:
		return arrow.PrimitiveTypes.Float32
	case colDate32:
		return arrow.FixedWidthTypes.Date32
	}
	return nil
}

// colCode returns the code simpleCol gives dt for.
func colCode(dt arrow.DataType) (byte, bool) {
	for code := colInt64; code <= colDate32; code++ {
		if t := simpleCol(code); t != nil && arrow.TypeEqual(t, dt) {
			return code, true
		}
	}
	return 0, false
}

// errPartDamaged is a part that does not decode.
var errPartDamaged = errors.New("an Iceberg sink's pre-commit part is damaged")

// encodePart encodes rec's rows as a part.
func encodePart(rec arrow.RecordBatch) ([]byte, error) {
	n := int(rec.NumRows())
	b := append([]byte(nil), partMagic...)
	b = binary.AppendUvarint(b, uint64(rec.NumCols()))
	for _, f := range rec.Schema().Fields() {
		b = binary.AppendUvarint(b, uint64(len(f.Name)))
		b = append(b, f.Name...)
		if t, ok := f.Type.(*arrow.TimestampType); ok {
			b = append(b, colTimestamp, byte(t.Unit))
			b = binary.AppendUvarint(b, uint64(len(t.TimeZone)))
			b = append(b, t.TimeZone...)
		} else if code, ok := colCode(f.Type); ok {
			b = append(b, code)
		} else {
			return nil, fmt.Errorf("column %s: an Iceberg sink does not buffer %s values", f.Name, f.Type)
		}
		nullable := byte(0)
		if f.Nullable {
			nullable = 1
		}
		b = append(b, nullable)
	}
	b = binary.AppendUvarint(b, uint64(n))
	for c := range int(rec.NumCols()) {
		col := rec.Column(c)
		bits := make([]byte, (n+7)/8)
		for i := range n {
			if col.IsValid(i) {
				bits[i/8] |= 1 << (i % 8)
			}
		}
		b = append(b, bits...)
		for i := range n {
			if !col.IsValid(i) {
				continue
			}
			switch a := col.(type) {
			case *array.Int64:
				b = binary.AppendVarint(b, a.Value(i))
			case *array.Boolean:
				v := byte(0)
				if a.Value(i) {
					v = 1
				}
				b = append(b, v)
			case *array.String:
				b = binary.AppendUvarint(b, uint64(len(a.Value(i))))
				b = append(b, a.Value(i)...)
			case *array.LargeString:
				b = binary.AppendUvarint(b, uint64(len(a.Value(i))))
				b = append(b, a.Value(i)...)
			case *array.Int32:
				b = binary.AppendVarint(b, int64(a.Value(i)))
			case *array.Float64:
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(a.Value(i)))
			case *array.Float32:
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(a.Value(i)))
			case *array.Timestamp:
				b = binary.AppendVarint(b, int64(a.Value(i)))
			case *array.Date32:
				b = binary.AppendVarint(b, int64(a.Value(i)))
			default:
				return nil, fmt.Errorf("column %s: an Iceberg sink does not buffer %T columns", rec.ColumnName(c), col)
			}
		}
	}
	return b, nil
}

// partReader reads a part, every length checked against the bytes left.
type partReader struct {
	b   []byte
	err error
}

func (r *partReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errPartDamaged, what)
	}
	r.b = nil
}

func (r *partReader) uvarint(what string) uint64 {
	v, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[k:]
	return v
}

func (r *partReader) varint(what string) int64 {
	v, k := binary.Varint(r.b)
	if k <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[k:]
	return v
}

// bytes returns the next n bytes (nil, and the reader failed, when there
// are not that many).
func (r *partReader) bytes(n uint64, what string) []byte {
	if n > uint64(len(r.b)) {
		r.fail(what)
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// decodePart returns the rows of part p as records: one for a part of this
// file's format, those of an Arrow IPC stream for a part stored before it.
// The caller releases them.
func decodePart(p []byte) ([]arrow.RecordBatch, error) {
	if !bytes.HasPrefix(p, []byte(partMagic)) {
		return decodeIPCPart(p)
	}
	r := &partReader{b: p[len(partMagic):]}
	ncols := r.uvarint("its column count")
	if r.err == nil && (ncols == 0 || ncols > uint64(len(r.b))) {
		r.fail(fmt.Sprintf("a column count of %d", ncols))
	}
	if r.err != nil {
		return nil, r.err
	}
	fields := make([]arrow.Field, 0, ncols)
	for c := uint64(0); c < ncols && r.err == nil; c++ {
		name := string(r.bytes(r.uvarint("a column's name"), "a column's name"))
		t := r.bytes(1, "a column's type")
		if r.err != nil {
			break
		}
		dt := simpleCol(t[0])
		switch {
		case dt != nil:
		case t[0] == colTimestamp:
			unit := r.bytes(1, "a timestamp's unit")
			zone := r.bytes(r.uvarint("a timestamp's zone"), "a timestamp's zone")
			if r.err == nil && unit[0] > byte(arrow.Nanosecond) {
				r.fail(fmt.Sprintf("a timestamp unit of %d", unit[0]))
			}
			if r.err == nil {
				dt = &arrow.TimestampType{Unit: arrow.TimeUnit(unit[0]), TimeZone: string(zone)}
			}
		default:
			r.fail(fmt.Sprintf("a column type of %d", t[0]))
		}
		nullable := r.bytes(1, "a column's nullability")
		if r.err == nil {
			fields = append(fields, arrow.Field{Name: name, Type: dt, Nullable: nullable[0] == 1})
		}
	}
	rows := r.uvarint("its row count")
	if r.err == nil && rows > uint64(len(r.b))*8/ncols {
		// Every column holds a bit of every row at least.
		r.fail(fmt.Sprintf("%d rows in %d bytes", rows, len(r.b)))
	}
	if r.err != nil {
		return nil, r.err
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	n := int(rows)
	for c := range fields {
		valid := r.bytes(uint64((n+7)/8), "a column's validity")
		col := b.Field(c)
		col.Reserve(min(n, len(r.b)+1))
		for i := 0; i < n && r.err == nil; i++ {
			if valid[i/8]&(1<<(i%8)) == 0 {
				col.AppendNull()
				continue
			}
			switch cb := col.(type) {
			case *array.Int64Builder:
				cb.Append(r.varint("an int64"))
			case *array.BooleanBuilder:
				v := r.bytes(1, "a bool")
				cb.Append(r.err == nil && v[0] == 1)
			case *array.StringBuilder:
				cb.Append(string(r.bytes(r.uvarint("a string"), "a string")))
			case *array.LargeStringBuilder:
				cb.Append(string(r.bytes(r.uvarint("a string"), "a string")))
			case *array.Int32Builder:
				v := r.varint("an int32")
				if v < math.MinInt32 || v > math.MaxInt32 {
					r.fail(fmt.Sprintf("an int32 of %d", v))
				}
				cb.Append(int32(v))
			case *array.Float64Builder:
				v := r.bytes(8, "a float64")
				if r.err == nil {
					cb.Append(math.Float64frombits(binary.LittleEndian.Uint64(v)))
				}
			case *array.Float32Builder:
				v := r.bytes(4, "a float32")
				if r.err == nil {
					cb.Append(math.Float32frombits(binary.LittleEndian.Uint32(v)))
				}
			case *array.TimestampBuilder:
				cb.Append(arrow.Timestamp(r.varint("a timestamp")))
			case *array.Date32Builder:
				v := r.varint("a date")
				if v < math.MinInt32 || v > math.MaxInt32 {
					r.fail(fmt.Sprintf("a date of %d days", v))
				}
				cb.Append(arrow.Date32(v))
			}
		}
		if r.err != nil {
			return nil, r.err
		}
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after its rows", errPartDamaged, len(r.b))
	}
	return []arrow.RecordBatch{b.NewRecordBatch()}, nil
}

// decodeIPCPart reads a part stored as an Arrow IPC stream (before this
// format), each message no longer than the part. Arrow's reader trusts the
// lengths inside its messages' metadata, so the stream's messages are
// checked first (checkIPCStream).
func decodeIPCPart(p []byte) (out []arrow.RecordBatch, err error) {
	var recs []arrow.RecordBatch
	defer func() {
		if e := recover(); e != nil {
			out, err = nil, fmt.Errorf("%w: %v", errPartDamaged, e)
		}
		if err != nil {
			for _, r := range recs {
				r.Release()
			}
		}
	}()
	if err := checkIPCStream(p); err != nil {
		return nil, fmt.Errorf("%w: %w", errPartDamaged, err)
	}
	limit := int64(len(p))
	rd, err := ipc.NewReaderFromMessageReader(ipc.NewMessageReader(bytes.NewReader(p), ipc.WithMetadataSizeLimit(limit), ipc.WithBodySizeLimit(limit)))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errPartDamaged, err)
	}
	defer rd.Release()
	for rd.Next() {
		r := rd.RecordBatch()
		r.Retain()
		recs = append(recs, r)
	}
	if err := rd.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", errPartDamaged, err)
	}
	return recs, nil
}
