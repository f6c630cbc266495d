// Package parquetcheck checks a Parquet file's stated structure before a
// library reads it. Parquet readers (parquet-go, Apache Arrow's) trust the
// sizes a file states: a footer length, a list's item count in the footer
// or a page's size in its header is allocated as stated, so a few corrupted
// bytes could ask for gigabytes, or for more than the process can have,
// which no recover survives. The check walks the footer's Thrift encoding
// and every page header of every column chunk, decompresses each page as a
// stream without keeping it, and refuses a file that states more than it
// holds or more than the bounds below.
//
// It may import github.com/parquet-go/parquet-go (its format and
// encoding/thrift packages), github.com/golang/snappy,
// github.com/klauspost/compress (its gzip and zstd packages),
// github.com/andybalholm/brotli, github.com/pierrec/lz4/v4 (Parquet's
// codecs) and the standard library.
package parquetcheck

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/andybalholm/brotli"
	"github.com/golang/snappy"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
	"github.com/pierrec/lz4/v4"
)

const (
	// MaxPageBytes bounds a page's stated size, compressed or not
	// (writers make pages of about 1 MiB; parquet-go's default is 8 KiB of
	// values per page, Spark's and Arrow's 1 MiB).
	MaxPageBytes = 256 << 20
	// MaxPageValues bounds the values a page states, which its
	// readers allocate room for whatever bytes they take (a run-length
	// encoding states a million nulls in a few bytes).
	MaxPageValues = 16 << 20
	// MaxHeaderBytes bounds a page header (its statistics hold
	// a page's smallest and largest values, which are usually short).
	MaxHeaderBytes = 16 << 20
	// MaxDepth bounds the nesting of Thrift structures and lists.
	MaxDepth = 64
)

// ErrCorrupt says a file's stated structure does not hold.
var ErrCorrupt = errors.New("corrupt Parquet structure")

// Footer checks a file's magic numbers and footer length and walks
// the footer's encoding (see thriftWalker). It returns the footer's bytes.
func Footer(r io.ReaderAt, size int64) ([]byte, error) {
	if size < 12 {
		return nil, fmt.Errorf("%w: %d bytes are too few for a Parquet file", ErrCorrupt, size)
	}
	var head, tail [8]byte
	if _, err := r.ReadAt(head[:4], 0); err != nil {
		return nil, err
	}
	if _, err := r.ReadAt(tail[:], size-8); err != nil {
		return nil, err
	}
	if string(head[:4]) != "PAR1" || string(tail[4:]) != "PAR1" {
		return nil, fmt.Errorf("%w: no PAR1 magic number at its start and end (an encrypted footer is not read)", ErrCorrupt)
	}
	n := int64(binary.LittleEndian.Uint32(tail[:4]))
	if n > size-12 {
		return nil, fmt.Errorf("%w: the footer states %d bytes, more than the file's %d", ErrCorrupt, n, size)
	}
	footer := make([]byte, n)
	if _, err := r.ReadAt(footer, size-8-n); err != nil {
		return nil, err
	}
	w := thriftWalker{b: footer}
	if err := w.structure(0, 0); err != nil {
		return nil, fmt.Errorf("%w: footer: %v", ErrCorrupt, err)
	}
	return footer, nil
}

// Pages checks the pages of every column chunk in md, of a file
// whose footer starts at dataEnd: each header is well-formed and within
// its chunk, and states a page within its chunk and the bounds above, and
// each compressed page decompresses to no more than its header states
// (pageBodies.check).
func Pages(r io.ReaderAt, md *format.FileMetaData, dataEnd int64) error {
	return ColumnPages(r, md, dataEnd, nil)
}

// ColumnPages is Pages for the leaf columns cols only (every column when
// cols is nil): a reader that reads some columns reads only their pages.
func ColumnPages(r io.ReaderAt, md *format.FileMetaData, dataEnd int64, cols []int) error {
	var buf []byte
	var pb pageBodies
	defer pb.close()
	for g := range md.RowGroups {
		for c := range md.RowGroups[g].Columns {
			if cols != nil && !slices.Contains(cols, c) {
				continue
			}
			cc := &md.RowGroups[g].Columns[c]
			if cc.FilePath != "" {
				return fmt.Errorf("%w: row group %d column %d is in another file (%q), which is not read", ErrCorrupt, g, c, cc.FilePath)
			}
			m := &cc.MetaData
			start := m.DataPageOffset
			if m.DictionaryPageOffset > 0 && m.DictionaryPageOffset < start {
				start = m.DictionaryPageOffset
			}
			end := start + m.TotalCompressedSize
			if start < 4 || m.TotalCompressedSize < 0 || end > dataEnd || end < start {
				return fmt.Errorf("%w: row group %d column %d states bytes %d to %d, outside the file's data (4 to %d)", ErrCorrupt, g, c, start, end, dataEnd)
			}
			for pos := start; pos < end; {
				n := min(end-pos, 64<<10)
				for {
					buf = grow(buf, int(n))
					if _, err := r.ReadAt(buf, pos); err != nil {
						return err
					}
					h, err := PageHeader(buf, n < end-pos)
					if err == nil {
						next := pos + int64(h.HeaderLen) + int64(h.compressed)
						if next > end {
							return fmt.Errorf("%w: a page at byte %d of row group %d column %d ends at byte %d, past its chunk's end %d", ErrCorrupt, pos, g, c, next, end)
						}
						if err := pb.check(r, m.Codec, h, pos+int64(h.HeaderLen)); err != nil {
							return fmt.Errorf("%w: the page at byte %d of row group %d column %d: %v", ErrCorrupt, pos, g, c, err)
						}
						pos = next
						break
					}
					if !errors.Is(err, errThriftShort) || n == end-pos || n >= MaxHeaderBytes {
						return fmt.Errorf("%w: the page header at byte %d of row group %d column %d: %v", ErrCorrupt, pos, g, c, err)
					}
					n = min(end-pos, 4*n, MaxHeaderBytes)
				}
			}
		}
	}
	return nil
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// Page is what a page header states.
type Page struct {
	// HeaderLen is the header's bytes.
	HeaderLen                int
	typ                      int64
	compressed, uncompressed int64
	values                   int64
	// levels is the bytes of a v2 data page's repetition and definition
	// levels, stored uncompressed before its values; plain says a v2 data
	// page's values are not compressed.
	levels int64
	plain  bool
}

// The page types (PageHeader.type); 1 is an index page, which no writer
// makes and readers skip.
const (
	pageData       = 0
	pageDictionary = 2
	pageDataV2     = 3
)

// PageHeader reads the page header at the start of b and checks what it
// states against the bounds, and that a data, dictionary or v2 data page
// has the header of its type (Arrow's reader follows it unchecked). With
// partial set, b may hold the header's start only: an encoding that goes
// on past b is then an error wrapping errThriftShort.
func PageHeader(b []byte, partial bool) (Page, error) {
	var p Page
	var sub uint16 // the type-specific headers seen, by their field ID's bit
	w := thriftWalker{b: b, partial: partial, ints: func(path uint32, v int64) {
		switch path {
		case 1:
			p.typ = v
		case 8<<16 | 5, 8<<16 | 6: // a v2 data page's level bytes
			p.levels += max(v, 0)
		case 8<<16 | 7: // a v2 data page's is_compressed
			p.plain = v == 0
		case 2: // uncompressed_page_size
			p.uncompressed = v
		case 3: // compressed_page_size
			p.compressed = v
		case 5<<16 | 1, 7<<16 | 1, 8<<16 | 1: // num_values of a data, dictionary or v2 data page
			p.values = max(p.values, v)
			sub |= 1 << (path >> 16)
		case 8<<16 | 3: // a v2 data page's num_rows
			p.values = max(p.values, v)
		}
	}}
	if err := w.structure(0, 0); err != nil {
		return p, err
	}
	p.HeaderLen = w.pos
	switch {
	case p.compressed < 0 || p.compressed > MaxPageBytes:
		return p, fmt.Errorf("it states %d compressed bytes (at most %d are read)", p.compressed, MaxPageBytes)
	case p.uncompressed < 0 || p.uncompressed > MaxPageBytes:
		return p, fmt.Errorf("it states %d uncompressed bytes (at most %d are read)", p.uncompressed, MaxPageBytes)
	case p.values < 0 || p.values > MaxPageValues:
		return p, fmt.Errorf("it states %d values (at most %d are read in a page)", p.values, MaxPageValues)
	case p.typ == pageDataV2 && (p.levels > p.compressed || p.levels > p.uncompressed):
		return p, fmt.Errorf("it states %d bytes of levels in a page of %d compressed and %d uncompressed bytes", p.levels, p.compressed, p.uncompressed)
	case p.typ < pageData || p.typ > pageDataV2:
		return p, fmt.Errorf("it states page type %d, which Parquet does not have", p.typ)
	}
	for _, need := range [...]struct {
		typ   int64
		field uint16
		name  string
	}{{pageData, 5, "data"}, {pageDictionary, 7, "dictionary"}, {pageDataV2, 8, "v2 data"}} {
		if p.typ == need.typ && sub&(1<<need.field) == 0 {
			return p, fmt.Errorf("it is a %s page without its %s page header", need.name, need.name)
		}
	}
	return p, nil
}

// errThriftShort: the encoding goes on past the bytes given.
var errThriftShort = errors.New("the encoding ends early")

// thriftWalker walks one structure of Thrift's compact encoding, checking
// that every length and item count fits in the bytes that are left (an
// item takes at least one byte) and that nesting stays within
// MaxDepth. ints, when set, receives the integer fields of the
// outer structure and of the structures it holds directly, by path (a
// field's ID, under its parent's ID shifted by 16).
type thriftWalker struct {
	b   []byte
	pos int
	// partial says b may be the start of the encoding only: a count
	// beyond it is then errThriftShort (read more), not an error.
	partial bool
	ints    func(path uint32, v int64)
}

// Thrift's compact types.
const (
	tcStop   = 0
	tcTrue   = 1
	tcFalse  = 2
	tcByte   = 3
	tcI16    = 4
	tcI32    = 5
	tcI64    = 6
	tcDouble = 7
	tcBinary = 8
	tcList   = 9
	tcSet    = 10
	tcMap    = 11
	tcStruct = 12
)

func (w *thriftWalker) byte() (byte, error) {
	if w.pos >= len(w.b) {
		return 0, errThriftShort
	}
	c := w.b[w.pos]
	w.pos++
	return c, nil
}

func (w *thriftWalker) uvarint() (uint64, error) {
	v, n := binary.Uvarint(w.b[w.pos:])
	switch {
	case n == 0:
		return 0, errThriftShort
	case n < 0:
		return 0, errors.New("a varint overflows 64 bits")
	}
	w.pos += n
	return v, nil
}

// count reads a length or item count and checks that n of them, of
// least bytes each, fit in what is left.
func (w *thriftWalker) count(v uint64, least int) (int, error) {
	left := uint64(len(w.b) - w.pos)
	if v > left/uint64(least) {
		if w.partial && v <= MaxHeaderBytes {
			return 0, errThriftShort // a longer read may hold them
		}
		return 0, fmt.Errorf("it states %d items or bytes where %d bytes are left", v, left)
	}
	return int(v), nil
}

// structure walks a structure's fields up to its stop. path is the
// structure's own path (0 for the outer one).
func (w *thriftWalker) structure(path uint32, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("nested more than %d deep", MaxDepth)
	}
	var id int64
	for {
		h, err := w.byte()
		if err != nil {
			return err
		}
		t := h & 0x0f
		if t == tcStop {
			return nil
		}
		if d := h >> 4; d != 0 {
			id += int64(d)
		} else {
			v, err := w.uvarint()
			if err != nil {
				return err
			}
			id = int64(v>>1) ^ -int64(v&1)
		}
		var fp uint32 // reported: the outer structure's fields and those of its structure fields
		if id > 0 && id < 1<<16 && (depth == 0 || depth == 1 && path != 0) {
			fp = path<<16 | uint32(id)
		}
		if err := w.value(t, fp, depth); err != nil {
			return err
		}
	}
}

// value walks one value of type t at path (0: not reported).
func (w *thriftWalker) value(t byte, path uint32, depth int) error {
	switch t {
	case tcTrue, tcFalse:
		if w.ints != nil && path != 0 { // a field's boolean is in its type
			w.ints(path, int64(2-t))
		}
		return nil
	case tcByte:
		_, err := w.byte()
		return err
	case tcI16, tcI32, tcI64:
		v, err := w.uvarint()
		if err != nil {
			return err
		}
		if w.ints != nil && path != 0 {
			w.ints(path, int64(v>>1)^-int64(v&1))
		}
		return nil
	case tcDouble:
		if len(w.b)-w.pos < 8 {
			return errThriftShort
		}
		w.pos += 8
		return nil
	case tcBinary:
		v, err := w.uvarint()
		if err != nil {
			return err
		}
		n, err := w.count(v, 1)
		if err != nil {
			return err
		}
		w.pos += n
		return nil
	case tcList, tcSet:
		h, err := w.byte()
		if err != nil {
			return err
		}
		size, et := uint64(h>>4), h&0x0f
		if size == 15 {
			if size, err = w.uvarint(); err != nil {
				return err
			}
		}
		n, err := w.count(size, 1)
		if err != nil {
			return err
		}
		for range n {
			if err := w.item(et, depth); err != nil {
				return err
			}
		}
		return nil
	case tcMap:
		size, err := w.uvarint()
		if err != nil {
			return err
		}
		if size == 0 {
			return nil
		}
		kv, err := w.byte()
		if err != nil {
			return err
		}
		n, err := w.count(size, 2)
		if err != nil {
			return err
		}
		for range n {
			if err := w.item(kv>>4, depth); err != nil {
				return err
			}
			if err := w.item(kv&0x0f, depth); err != nil {
				return err
			}
		}
		return nil
	case tcStruct:
		return w.structure(path, depth+1)
	default:
		return fmt.Errorf("unknown Thrift type %d", t)
	}
}

// pageBodies checks that compressed pages decompress to no more than
// their headers state. parquet-go trusts the data on that, in ways that
// cost memory without bound: its gzip, Brotli and zstd decoders grow
// their output for as long as the data goes on (a page of a few
// kilobytes can inflate to gigabytes), its Snappy decoder allocates the
// length a page's first bytes state, and its LZ4 decoder doubles its
// buffer on any error, for ever. The check decompresses each page as a
// stream, keeping none of its output (LZ4's blocks, which cannot be
// streamed, into one buffer of the page's stated size, reused).
type pageBodies struct {
	body []byte
	lz4  []byte
	gz   *gzip.Reader
	zstd *zstd.Decoder
}

// check checks the page h whose body starts at byte off of r, compressed
// with codec.
func (pb *pageBodies) check(r io.ReaderAt, codec format.CompressionCodec, h Page, off int64) error {
	if codec == format.Uncompressed || h.plain || (h.typ != pageData && h.typ != pageDictionary && h.typ != pageDataV2) {
		return nil
	}
	n, limit := h.compressed, h.uncompressed
	if h.typ == pageDataV2 {
		off, n, limit = off+h.levels, n-h.levels, limit-h.levels
	}
	if codec == format.Snappy {
		var head [binary.MaxVarintLen32]byte
		k := min(n, int64(len(head)))
		if _, err := r.ReadAt(head[:k], off); err != nil {
			return err
		}
		d, err := snappy.DecodedLen(head[:k])
		if err != nil {
			return fmt.Errorf("its Snappy data: %v", err)
		}
		if int64(d) > limit {
			return fmt.Errorf("its Snappy data states %d bytes, more than the %d its header states", d, limit)
		}
		return nil
	}
	pb.body = grow(pb.body, int(n))
	if _, err := r.ReadAt(pb.body, off); err != nil {
		return err
	}
	lw := &limitWriter{left: limit}
	var err error
	switch codec {
	case format.Gzip:
		if pb.gz == nil {
			pb.gz, err = gzip.NewReader(bytes.NewReader(pb.body))
		} else {
			err = pb.gz.Reset(bytes.NewReader(pb.body))
		}
		if err == nil {
			_, err = io.Copy(lw, pb.gz)
		}
	case format.Zstd:
		if pb.zstd == nil {
			pb.zstd, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxPageBytes+1))
		}
		if err == nil {
			if err = pb.zstd.Reset(bytes.NewReader(pb.body)); err == nil {
				_, err = io.Copy(lw, pb.zstd)
			}
		}
	case format.Brotli:
		_, err = io.Copy(lw, brotli.NewReader(bytes.NewReader(pb.body)))
	case format.Lz4Raw:
		pb.lz4 = grow(pb.lz4, int(limit))
		_, err = lz4.UncompressBlock(pb.body, pb.lz4)
		if err != nil {
			err = fmt.Errorf("%v (into the %d bytes its header states)", err, limit)
		}
	default:
		return nil // parquet-go refuses the codecs it does not know
	}
	if err != nil {
		return fmt.Errorf("decompressing it (%s): %v", codec, err)
	}
	return nil
}

// close releases the decoders.
func (pb *pageBodies) close() {
	if pb.zstd != nil {
		pb.zstd.Close()
	}
}

// limitWriter discards what it is given, failing once it was given more
// than left bytes.
type limitWriter struct{ left int64 }

func (w *limitWriter) Write(p []byte) (int, error) {
	w.left -= int64(len(p))
	if w.left < 0 {
		return 0, errors.New("it decompresses to more bytes than its header states")
	}
	return len(p), nil
}

// item walks one item of type t of a list, set or map at depth: a
// boolean item takes a byte (a field's is in its type).
func (w *thriftWalker) item(t byte, depth int) error {
	if t == tcTrue || t == tcFalse {
		_, err := w.byte()
		return err
	}
	return w.value(t, 0, depth+1)
}

// File checks the Parquet file r of size bytes: its footer, the metadata
// the footer holds (Metadata), and the pages of every column chunk
// (Pages). It returns the metadata. A file that does not hold is an error
// wrapping ErrCorrupt.
func File(r io.ReaderAt, size int64) (*format.FileMetaData, error) {
	md, dataEnd, err := Metadata(r, size)
	if err != nil {
		return nil, err
	}
	if err := Pages(r, md, dataEnd); err != nil {
		return nil, err
	}
	return md, nil
}

// Metadata checks the footer of the Parquet file r of size bytes (Footer)
// and returns the metadata it holds and where the file's data ends (its
// footer's start). A panic of the metadata's decoder is an error wrapping
// ErrCorrupt.
func Metadata(r io.ReaderAt, size int64) (md *format.FileMetaData, dataEnd int64, err error) {
	footer, err := Footer(r, size)
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		if p := recover(); p != nil {
			md, dataEnd, err = nil, 0, fmt.Errorf("%w: footer: %v", ErrCorrupt, p)
		}
	}()
	md = new(format.FileMetaData)
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), footer, md); err != nil {
		return nil, 0, fmt.Errorf("%w: footer: %v", ErrCorrupt, err)
	}
	return md, size - 8 - int64(len(footer)), nil
}
