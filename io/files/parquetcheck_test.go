package files

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/weir-dev/weir/io/parquetcheck"
	"github.com/weir-dev/weir/runner/contract"
)

type parquetTestRow struct {
	A int64   `parquet:"a,optional"`
	B string  `parquet:"b,optional"`
	C float64 `parquet:"c,optional"`
	D []int64 `parquet:"d"`
}

// validParquet is a Parquet file of n rows, in small pages, written with
// the writer options opts.
func validParquet(t *testing.T, n int, opts ...parquet.WriterOption) []byte {
	t.Helper()
	var buf strings.Builder
	w := parquet.NewGenericWriter[parquetTestRow](&buf, append([]parquet.WriterOption{parquet.PageBufferSize(2048)}, opts...)...)
	rows := make([]parquetTestRow, n)
	for i := range rows {
		rows[i] = parquetTestRow{A: int64(i), B: fmt.Sprint("v", i), C: float64(i) / 3, D: []int64{1, 2, int64(i)}}
	}
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return []byte(buf.String())
}

// readParquetFile reads the Parquet file b as ReadFromParquet does (its
// schema first, then its rows) and returns the rows read or the error.
func readParquetFile(t *testing.T, path string, b []byte) (int, error) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	sch, err := ParquetSchema(path)
	if err != nil {
		return 0, err
	}
	splits, err := NewSource(SourceConfig{Step: "R", Path: path, Format: Parquet, Schema: sch, TimestampField: -1}).Split(context.Background(), 1)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, sp := range splits {
		defer sp.Close()
		buf := make([]contract.Element, 64)
		for {
			res, err := sp.Read(context.Background(), buf)
			if err != nil {
				return n, err
			}
			n += res.N
			if res.Done {
				break
			}
		}
	}
	return n, nil
}

// allocated returns the bytes fn allocated.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// firstPage returns the offset of the first data page of file b and the
// length of its header.
func firstPage(t *testing.T, b []byte) (int64, int) {
	t.Helper()
	pf, err := parquet.OpenFile(strings.NewReader(string(b)), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	off := pf.Metadata().RowGroups[0].Columns[0].MetaData.DataPageOffset
	h, err := parquetcheck.PageHeader(b[off:], false)
	if err != nil {
		t.Fatal(err)
	}
	return off, h.HeaderLen
}

// withPageHeader returns file b with the header of its first page changed
// by change.
func withPageHeader(t *testing.T, b []byte, change func(*format.PageHeader)) []byte {
	t.Helper()
	off, n := firstPage(t, b)
	var h format.PageHeader
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), b[off:off+int64(n)], &h); err != nil {
		t.Fatal(err)
	}
	change(&h)
	nh, err := thrift.Marshal(new(thrift.CompactProtocol), &h)
	if err != nil {
		t.Fatal(err)
	}
	out := append([]byte(nil), b[:off]...)
	out = append(out, nh...)
	return append(out, b[off+int64(n):]...)
}

// withFooter returns a file of b's data with footer as its footer.
func withFooter(footer []byte) []byte {
	out := []byte("PAR1")
	out = append(out, footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	return append(out, "PAR1"...)
}

// TestParquetStatedSizesChecked: a Parquet file whose footer or page
// headers state more than the file holds, or more than a page may, is
// refused with an error that names the file, before anything is allocated
// at the stated size.
func TestParquetStatedSizesChecked(t *testing.T) {
	valid := validParquet(t, 1000)
	nested := []byte{}
	for range 200 {
		nested = append(nested, 0x1c) // field +1, a structure
	}
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{name: "a footer longer than the file", want: "the footer states",
			file: append(append([]byte(nil), valid[:len(valid)-8]...), 0xf0, 0xff, 0xff, 0x7f, 'P', 'A', 'R', '1')},
		{name: "a footer list of 2^31 row groups", want: "items or bytes",
			// version 1, then field 4 (row_groups): a list of 2^31-1 structures.
			file: withFooter([]byte{0x15, 0x02, 0x39, 0xfc, 0xff, 0xff, 0xff, 0xff, 0x07, 0x00})},
		{name: "a footer string of 2 GiB", want: "items or bytes",
			file: withFooter([]byte{0x15, 0x02, 0x68, 0xff, 0xff, 0xff, 0xff, 0x07, 0x00})},
		{name: "a footer nested 200 deep", want: "nested more than",
			file: withFooter(nested)},
		{name: "a page of 2 GiB compressed", want: "compressed bytes",
			file: withPageHeader(t, valid, func(h *format.PageHeader) { h.CompressedPageSize = math.MaxInt32 })},
		{name: "a page of 2 GiB uncompressed", want: "uncompressed bytes",
			file: withPageHeader(t, valid, func(h *format.PageHeader) { h.UncompressedPageSize = math.MaxInt32 })},
		{name: "a page of 2^30 values", want: "values",
			file: withPageHeader(t, valid, func(h *format.PageHeader) {
				if h.DataPageHeaderV2.Valid {
					h.DataPageHeaderV2.V.NumValues = 1 << 30
				} else {
					h.DataPageHeader.V.NumValues = 1 << 30
				}
			})},
		{name: "a page past its chunk", want: "past its chunk",
			file: withPageHeader(t, valid, func(h *format.PageHeader) { h.CompressedPageSize += 1 << 20 })},
		{name: "no magic number", want: "magic",
			file: append([]byte("PAR0"), valid[4:]...)},
	}
	path := filepath.Join(t.TempDir(), "in.parquet")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			a := allocated(func() { _, err = readParquetFile(t, path, tc.file) })
			if !errors.Is(err, parquetcheck.ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want a corrupt file named %s saying %q", err, path, tc.want)
			}
			if a > 32<<20 {
				t.Errorf("%d MiB allocated to refuse it", a>>20)
			}
		})
	}
	t.Run("the valid file", func(t *testing.T) {
		n, err := readParquetFile(t, path, valid)
		if err != nil || n != 1000 {
			t.Fatalf("read %d rows, %v; want 1000", n, err)
		}
	})
}

// TestParquetCorruptedBytes: a valid file with a few bytes changed at
// random either reads or fails with an error — never a panic, and never
// with more memory than the file's size justifies.
func TestParquetCorruptedBytes(t *testing.T) {
	valid := validParquet(t, 300)
	path := filepath.Join(t.TempDir(), "in.parquet")
	rng := rand.New(rand.NewSource(7))
	failed := 0
	for i := range 1000 {
		b := append([]byte(nil), valid...)
		for range 1 + rng.Intn(4) {
			p := rng.Intn(len(b))
			switch rng.Intn(3) {
			case 0:
				b[p] = byte(rng.Intn(256))
			case 1:
				b[p] = 0xff
			default:
				b[p] ^= 1 << rng.Intn(8)
			}
		}
		var err error
		if a := allocated(func() { _, err = readParquetFile(t, path, b) }); a > 64<<20 {
			t.Errorf("mutation %d: %d MiB allocated for a file of %d bytes", i, a>>20, len(b))
		}
		if err != nil {
			failed++
		}
	}
	if failed == 0 {
		t.Error("no corrupted file failed: the mutations changed nothing")
	}
}

// TestParquetPagesDecompressWithinTheirHeaders: a page of every codec
// that decompresses to more than its header states is refused before
// parquet-go reads it (its decoders would grow their output for as long
// as the data goes on, or, for LZ4, for ever on any error), and files of
// every codec that keep to their headers read whole.
func TestParquetPagesDecompressWithinTheirHeaders(t *testing.T) {
	codecs := []struct {
		name  string
		codec compress.Codec
		want  string
	}{
		{"snappy", &parquet.Snappy, "Snappy data states"},
		{"gzip", &parquet.Gzip, "more bytes than its header states"},
		{"zstd", &parquet.Zstd, "more bytes than its header states"},
		{"brotli", &parquet.Brotli, "more bytes than its header states"},
		{"lz4", &parquet.Lz4Raw, "into the"},
	}
	path := filepath.Join(t.TempDir(), "in.parquet")
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			valid := validParquet(t, 1000, parquet.Compression(c.codec))
			if n, err := readParquetFile(t, path, valid); err != nil || n != 1000 {
				t.Fatalf("the valid file: read %d rows, %v; want 1000", n, err)
			}
			understated := withPageHeader(t, valid, func(h *format.PageHeader) {
				levels := int32(0)
				if h.DataPageHeaderV2.Valid {
					levels = h.DataPageHeaderV2.V.RepetitionLevelsByteLength + h.DataPageHeaderV2.V.DefinitionLevelsByteLength
				}
				h.UncompressedPageSize = levels + (h.UncompressedPageSize-levels)/4
			})
			_, err := readParquetFile(t, path, understated)
			if !errors.Is(err, parquetcheck.ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("a page that decompresses to 4 times its stated size: %v, want a corrupt file saying %q", err, c.want)
			}
		})
	}
	t.Run("a corrupted lz4 page", func(t *testing.T) {
		valid := validParquet(t, 1000, parquet.Compression(&parquet.Lz4Raw))
		off, n := firstPage(t, valid)
		b := append([]byte(nil), valid...)
		for i := off + int64(n); i < off+int64(n)+40; i++ {
			b[i] = 0xff // match lengths and offsets past anything decoded
		}
		if _, err := readParquetFile(t, path, b); !errors.Is(err, parquetcheck.ErrCorrupt) {
			t.Fatalf("error %v, want a corrupt file", err)
		}
	})
}
