package avrorow

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/golang/snappy"
	"github.com/hamba/avro/v2"
	"github.com/klauspost/compress/zstd"
)

// An object container file (ReadFromAvro's files) is a header — magic,
// metadata (the schema, the codec), a 16-byte sync marker — then blocks,
// each a record count, a size, that many bytes (compressed with the
// codec) holding the records, and the sync marker again.

// MaxBlockBytes bounds a container block, as stored and decompressed: a
// file cannot make its reader allocate more on the word of a size field
// or a compressed block.
const MaxBlockBytes = 64 << 20

// maxHeaderEntries and maxHeaderValue bound a container header's
// metadata.
const (
	maxHeaderEntries = 1024
	maxHeaderValue   = 1 << 20
)

// ErrContainer is the class of files that are not an Avro object
// container this reader can read.
var ErrContainer = errors.New("not an Avro object container file")

// OCFReader reads the records of an Avro object container file, block by
// block, each record with a Decoder.
type OCFReader struct {
	br     *bufio.Reader
	schema *avro.RecordSchema
	codec  string
	sync   [16]byte
	zstd   *zstd.Decoder

	block  []byte // the current block, decompressed
	pos    int    // where its next record starts
	left   int64  // its records not read yet
	blocks int    // blocks read, for messages
}

// NewOCFReader reads r's header. The file's schema must be a record.
func NewOCFReader(r io.Reader) (*OCFReader, error) {
	o := &OCFReader{br: bufio.NewReaderSize(r, 64<<10)}
	var magic [4]byte
	if _, err := io.ReadFull(o.br, magic[:]); err != nil || magic != [4]byte{'O', 'b', 'j', 1} {
		return nil, fmt.Errorf("%w: no magic bytes", ErrContainer)
	}
	meta := map[string][]byte{}
	for {
		n, err := o.count()
		if err != nil {
			return nil, fmt.Errorf("%w: header: %w", ErrContainer, err)
		}
		if n == 0 {
			break
		}
		if int64(len(meta))+n > maxHeaderEntries {
			return nil, fmt.Errorf("%w: more than %d header entries", ErrContainer, maxHeaderEntries)
		}
		for range n {
			k, err := o.bytes(maxHeaderValue)
			if err != nil {
				return nil, fmt.Errorf("%w: header: %w", ErrContainer, err)
			}
			v, err := o.bytes(maxHeaderValue)
			if err != nil {
				return nil, fmt.Errorf("%w: header %s: %w", ErrContainer, k, err)
			}
			meta[string(k)] = v
		}
	}
	if _, err := io.ReadFull(o.br, o.sync[:]); err != nil {
		return nil, fmt.Errorf("%w: no sync marker after the header", ErrContainer)
	}
	text, ok := meta["avro.schema"]
	if !ok {
		return nil, fmt.Errorf("%w: the header has no avro.schema", ErrContainer)
	}
	s, err := avro.ParseWithCache(string(text), "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("%w: its schema: %w", ErrContainer, err)
	}
	if o.schema, ok = s.(*avro.RecordSchema); !ok {
		return nil, fmt.Errorf("the file holds %s values, not records: weir reads Avro records as rows", s.Type())
	}
	o.codec = string(meta["avro.codec"])
	switch o.codec {
	case "", "null", "deflate", "snappy":
	case "zstandard":
		if o.zstd, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxBlockBytes)); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w: codec %q is not one of null, deflate, snappy, zstandard", ErrContainer, o.codec)
	}
	return o, nil
}

// Schema returns the file's record schema.
func (o *OCFReader) Schema() *avro.RecordSchema { return o.schema }

// Close releases the reader's decompressor.
func (o *OCFReader) Close() {
	if o.zstd != nil {
		o.zstd.Close()
	}
}

// Next reads the next record into vals with d (a Decoder of the file's
// schema). It returns false at the file's end.
func (o *OCFReader) Next(d *Decoder, vals []any) (bool, error) {
	for o.left == 0 {
		ok, err := o.nextBlock()
		if !ok || err != nil {
			return false, err
		}
	}
	n, err := d.DecodeNext(o.block[o.pos:], vals)
	if err != nil {
		return false, fmt.Errorf("block %d: %w", o.blocks, err)
	}
	o.pos += n
	o.left--
	return true, nil
}

// nextBlock reads and decompresses the next block; false at the end.
func (o *OCFReader) nextBlock() (bool, error) {
	if _, err := o.br.Peek(1); err == io.EOF {
		return false, nil
	}
	o.blocks++
	count, err := binary.ReadVarint(o.br)
	if err != nil || count < 0 {
		return false, fmt.Errorf("%w: block %d: no record count", ErrContainer, o.blocks)
	}
	stored, err := o.bytes(MaxBlockBytes)
	if err != nil {
		return false, fmt.Errorf("%w: block %d: %w", ErrContainer, o.blocks, err)
	}
	var sync [16]byte
	if _, err := io.ReadFull(o.br, sync[:]); err != nil || sync != o.sync {
		return false, fmt.Errorf("%w: block %d does not end with the file's sync marker", ErrContainer, o.blocks)
	}
	if o.block, err = o.decompress(stored); err != nil {
		return false, fmt.Errorf("%w: block %d: %w", ErrContainer, o.blocks, err)
	}
	// A record takes a byte at least, but one whose fields take none
	// (nulls): those only up to MaxEmptyItems a block, or a few bytes
	// could claim endless records.
	if count > int64(max(len(o.block), MaxEmptyItems)) {
		return false, fmt.Errorf("%w: block %d claims %d records in %d bytes", ErrContainer, o.blocks, count, len(o.block))
	}
	o.pos, o.left = 0, count
	return true, nil
}

func (o *OCFReader) decompress(b []byte) ([]byte, error) {
	switch o.codec {
	case "deflate":
		out, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(b)), MaxBlockBytes+1))
		if err != nil {
			return nil, fmt.Errorf("deflate: %w", err)
		}
		if len(out) > MaxBlockBytes {
			return nil, fmt.Errorf("decompresses past %d bytes", MaxBlockBytes)
		}
		return out, nil
	case "snappy":
		if len(b) < 4 {
			return nil, errors.New("snappy: no checksum")
		}
		n, err := snappy.DecodedLen(b[:len(b)-4])
		if err != nil {
			return nil, fmt.Errorf("snappy: %w", err)
		}
		if n > MaxBlockBytes {
			return nil, fmt.Errorf("decompresses past %d bytes", MaxBlockBytes)
		}
		out, err := snappy.Decode(nil, b[:len(b)-4])
		if err != nil {
			return nil, fmt.Errorf("snappy: %w", err)
		}
		if crc32.ChecksumIEEE(out) != binary.BigEndian.Uint32(b[len(b)-4:]) {
			return nil, errors.New("snappy: checksum mismatch")
		}
		return out, nil
	case "zstandard":
		out, err := o.zstd.DecodeAll(b, nil)
		if err != nil {
			return nil, fmt.Errorf("zstandard: %w", err)
		}
		if len(out) > MaxBlockBytes {
			return nil, fmt.Errorf("decompresses past %d bytes", MaxBlockBytes)
		}
		return out, nil
	}
	return b, nil
}

// count reads a header map block's count (negative: its magnitude, then
// the block's size).
func (o *OCFReader) count() (int64, error) {
	n, err := binary.ReadVarint(o.br)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		if n = -n; n < 0 {
			return 0, errors.New("a block of too many entries")
		}
		if _, err := binary.ReadVarint(o.br); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// bytes reads a length-prefixed byte string of at most max bytes.
func (o *OCFReader) bytes(max int) ([]byte, error) {
	n, err := binary.ReadVarint(o.br)
	if err != nil {
		return nil, err
	}
	if n < 0 || n > int64(max) {
		return nil, fmt.Errorf("a length of %d bytes (at most %d are read)", n, max)
	}
	// Read as it comes, not allocated up front: a length the file claims
	// costs only the bytes it has.
	b, err := io.ReadAll(io.LimitReader(o.br, n))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) < n {
		return nil, fmt.Errorf("the file ends inside %d bytes", n)
	}
	return b, nil
}
