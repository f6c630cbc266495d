package iceberg

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// partRecord is a record of every column type the sink buffers, with
// nulls, extremes and an empty string.
func partRecord(t *testing.T, rows int) arrow.RecordBatch {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: false},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := range rows {
		if i%5 == 3 {
			for c := range sc.NumFields() {
				if c == 3 {
					b.Field(c).(*array.LargeStringBuilder).Append("")
					continue
				}
				b.Field(c).AppendNull()
			}
			continue
		}
		x := int64(i*7919) - 5000
		if i == 1 {
			x = math.MinInt64
		}
		b.Field(0).(*array.Int64Builder).Append(x)
		b.Field(1).(*array.BooleanBuilder).Append(i%2 == 0)
		b.Field(2).(*array.StringBuilder).Append(string(rune('a'+i%26)) + "é")
		b.Field(3).(*array.LargeStringBuilder).Append("large")
		b.Field(4).(*array.Int32Builder).Append(int32(-i))
		b.Field(5).(*array.Float64Builder).Append(float64(i) / 3)
		b.Field(6).(*array.Float32Builder).Append(float32(i) * 1.5)
		b.Field(7).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + int64(i)))
		b.Field(8).(*array.Date32Builder).Append(arrow.Date32(20000 + i))
	}
	return b.NewRecordBatch()
}

// TestPartRoundTrip: a part holds every column type the sink buffers,
// with their nulls, as they were; a part stored by an earlier weir (an
// Arrow IPC stream) still reads.
func TestPartRoundTrip(t *testing.T) {
	rec := partRecord(t, 50)
	defer rec.Release()
	p, err := encodePart(rec)
	if err != nil {
		t.Fatal(err)
	}
	var ipcPart bytes.Buffer
	w := ipc.NewWriter(&ipcPart, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for name, part := range map[string][]byte{"this format": p, "Arrow IPC (before it)": ipcPart.Bytes()} {
		got, err := decodePart(part)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != 1 || !array.RecordEqual(got[0], rec) || !got[0].Schema().Equal(rec.Schema()) {
			t.Errorf("%s: read back %v, want %v", name, got, rec)
		}
		for _, r := range got {
			r.Release()
		}
	}
}

// TestPartDamage: a part with changed bytes, cut short, or claiming more
// than it holds either reads or is refused as damaged — it never panics,
// and never allocates much more than it holds (Arrow's IPC reader, which
// parts used before, allocated what a changed byte claimed: a fatal
// out-of-memory).
func TestPartDamage(t *testing.T) {
	rec := partRecord(t, 40)
	defer rec.Release()
	good, err := encodePart(rec)
	if err != nil {
		t.Fatal(err)
	}
	var parts [][]byte
	for n := range len(good) {
		parts = append(parts, good[:n])
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		p := bytes.Clone(good)
		for range 1 + r.IntN(3) {
			p[r.IntN(len(p))] = byte(r.Uint32())
		}
		parts = append(parts, p)
	}
	huge := append([]byte(partMagic), 0x01, 0x01, 'x', colInt64, 1)
	huge = append(huge, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f) // 2^63-1 rows
	parts = append(parts, huge, append([]byte(partMagic), 0xff, 0xff, 0xff, 0xff, 0x0f))
	var worst uint64
	for i, p := range parts {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got, err := decodePart(p)
		runtime.ReadMemStats(&after)
		for _, r := range got {
			r.Release()
		}
		if err != nil && !errors.Is(err, errPartDamaged) {
			t.Fatalf("part %d: %v, not errPartDamaged", i, err)
		}
		if i < len(good) && err == nil {
			t.Errorf("the part cut to %d of its %d bytes read", i, len(good))
		}
		worst = max(worst, after.TotalAlloc-before.TotalAlloc)
	}
	if worst > 4<<20 {
		t.Errorf("a damaged part of %d bytes made the decoder allocate %d bytes", len(good), worst)
	}
}
