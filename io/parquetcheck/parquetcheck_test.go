package parquetcheck

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

type testRow struct {
	A int64  `parquet:"a"`
	B string `parquet:"b,optional"`
}

// testFile is a Parquet file of n rows in small pages.
func testFile(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[testRow](&buf, parquet.PageBufferSize(512))
	rows := make([]testRow, n)
	for i := range rows {
		rows[i] = testRow{A: int64(i), B: strings.Repeat("x", i%7)}
	}
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// withFirstPage returns b with the header of the first data page of
// column col changed.
func withFirstPage(t *testing.T, b []byte, col int, change func(*format.PageHeader)) []byte {
	t.Helper()
	md, err := File(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	off := md.RowGroups[0].Columns[col].MetaData.DataPageOffset
	p, err := PageHeader(b[off:], false)
	if err != nil {
		t.Fatal(err)
	}
	var h format.PageHeader
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), b[off:off+int64(p.HeaderLen)], &h); err != nil {
		t.Fatal(err)
	}
	change(&h)
	nh, err := thrift.Marshal(new(thrift.CompactProtocol), &h)
	if err != nil {
		t.Fatal(err)
	}
	if len(nh) != p.HeaderLen {
		t.Fatalf("the changed header is %d bytes, the first %d: the file's offsets would move", len(nh), p.HeaderLen)
	}
	out := append([]byte(nil), b[:off]...)
	out = append(out, nh...)
	return append(out, b[off+int64(p.HeaderLen):]...)
}

// TestFile: a valid file passes with its metadata; a file whose page
// headers state a type without its header, or a type Parquet does not
// have, or whose footer is cut, is refused as corrupt, saying why (Arrow's
// reader dereferenced the missing header).
func TestFile(t *testing.T) {
	valid := testFile(t, 2000)
	md, err := File(bytes.NewReader(valid), int64(len(valid)))
	if err != nil {
		t.Fatalf("a valid file: %v", err)
	}
	if md.NumRows != 2000 {
		t.Fatalf("a valid file's metadata says %d rows, want 2000", md.NumRows)
	}
	for _, tc := range []struct {
		name string
		file []byte
		want string
	}{
		{"a dictionary page without its header", withFirstPage(t, valid, 0, func(h *format.PageHeader) { h.Type = format.DictionaryPage }), "without its dictionary page header"},
		{"a data page of the other version without its header", withFirstPage(t, valid, 0, func(h *format.PageHeader) {
			if h.Type == format.DataPageV2 {
				h.Type = format.DataPage
			} else {
				h.Type = format.DataPageV2
			}
		}), "data page without its"},
		{"a page type Parquet does not have", withFirstPage(t, valid, 0, func(h *format.PageHeader) { h.Type = 9 }), "page type 9"},
		{"a footer cut short", append(append([]byte(nil), valid[:len(valid)-40]...), valid[len(valid)-8:]...), "footer"},
		{"no magic number", valid[4:], "magic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := File(bytes.NewReader(tc.file), int64(len(tc.file)))
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want a corrupt file saying %q", err, tc.want)
			}
		})
	}
}

// TestColumnPages: the pages of the columns given are checked, and those
// of the others are not (a reader of some columns reads only theirs).
func TestColumnPages(t *testing.T) {
	valid := testFile(t, 2000)
	damaged := withFirstPage(t, valid, 1, func(h *format.PageHeader) { h.Type = 9 })
	md, dataEnd, err := Metadata(bytes.NewReader(damaged), int64(len(damaged)))
	if err != nil {
		t.Fatalf("the damaged file's footer: %v", err)
	}
	r := bytes.NewReader(damaged)
	if err := ColumnPages(r, md, dataEnd, []int{0}); err != nil {
		t.Errorf("column 0 of a file whose column 1 is damaged: %v", err)
	}
	for _, cols := range [][]int{{1}, {0, 1}, nil} {
		if err := ColumnPages(r, md, dataEnd, cols); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "column 1") {
			t.Errorf("columns %v of a file whose column 1 is damaged: %v, want the damage named", cols, err)
		}
	}
}
