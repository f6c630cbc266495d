package avrorow

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/hamba/avro/v2/ocf"

	"github.com/weir-dev/weir/row"
)

// readAll reads every record of an object container file as rows' JSON.
func readAll(t *testing.T, file []byte) ([]string, error) {
	t.Helper()
	o, err := NewOCFReader(bytes.NewReader(file))
	if err != nil {
		return nil, err
	}
	defer o.Close()
	sch, err := RowSchema(o.Schema())
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDecoder(o.Schema(), sch)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		r := row.New(sch)
		ok, err := o.Next(d, r.Values)
		if err != nil {
			return out, err
		}
		if !ok {
			return out, nil
		}
		out = append(out, string(row.AppendJSON(nil, r)))
	}
}

// TestOCFReaderReadsEveryCodec: files hamba/avro's own encoder writes,
// with every codec and several blocks, read back record for record.
func TestOCFReaderReadsEveryCodec(t *testing.T) {
	rs, err := Parse(orderSchema)
	if err != nil {
		t.Fatal(err)
	}
	sch, _ := RowSchema(rs)
	var want []string
	for i := range 25 {
		o := testOrder()
		o.Amount = int64(i)
		data, _ := avro.Marshal(rs, o)
		want = append(want, hambaRow(t, rs, sch, data))
	}
	for _, codec := range []ocf.CodecName{ocf.Null, ocf.Deflate, ocf.Snappy, ocf.ZStandard} {
		t.Run(string(codec), func(t *testing.T) {
			var buf bytes.Buffer
			enc, err := ocf.NewEncoder(orderSchema, &buf, ocf.WithCodec(codec), ocf.WithBlockLength(7))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 25 {
				o := testOrder()
				o.Amount = int64(i)
				if err := enc.Encode(o); err != nil {
					t.Fatal(err)
				}
			}
			if err := enc.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := readAll(t, buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("records\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// container builds a container file by hand: header with schema and
// codec, sync marker, then the given blocks (each count, data).
func container(schema, codec string, blocks ...[]byte) []byte {
	sync := bytes.Repeat([]byte{7}, 16)
	b := []byte{'O', 'b', 'j', 1}
	b = append(b, zz(2)...)
	for _, kv := range [][2]string{{"avro.schema", schema}, {"avro.codec", codec}} {
		b = append(b, zz(int64(len(kv[0])))...)
		b = append(b, kv[0]...)
		b = append(b, zz(int64(len(kv[1])))...)
		b = append(b, kv[1]...)
	}
	b = append(b, zz(0)...)
	b = append(b, sync...)
	for _, blk := range blocks {
		b = append(b, blk...)
		b = append(b, sync...)
	}
	return b
}

// block is a block's count, size and data.
func block(count int64, data []byte) []byte {
	return cat(zz(count), zz(int64(len(data))), data)
}

// TestOCFReaderRefusesWhatAFileOnlyClaims: sizes, counts and compressed
// blocks are bounded before anything is allocated for them; a file that
// is not a container is named so.
func TestOCFReaderRefusesWhatAFileOnlyClaims(t *testing.T) {
	const longs = `{"type": "record", "name": "L", "fields": [{"name": "n", "type": "long"}]}`
	const nulls = `{"type": "record", "name": "N", "fields": [{"name": "n", "type": "null"}]}`
	var bomb bytes.Buffer
	w, _ := flate.NewWriter(&bomb, flate.BestCompression)
	_, _ = w.Write(make([]byte, MaxBlockBytes+1))
	_ = w.Close()
	badSync := container(longs, "null", block(1, zz(5)))
	badSync[len(badSync)-1] = 8
	for _, tc := range []struct {
		name string
		file []byte
		want string
	}{
		{"not a container", []byte("nope"), "no magic bytes"},
		{"an unknown codec", container(longs, "lzma"), `codec "lzma" is not one of`},
		{"a schema of longs", container(`"long"`, "null"), "holds long values, not records"},
		{"a block claiming a terabyte", container(longs, "null", cat(zz(1), zz(1<<40), zz(5))), "a length of 1099511627776 bytes"},
		{"a deflate bomb", container(longs, "deflate", block(1, bomb.Bytes())), fmt.Sprintf("decompresses past %d bytes", MaxBlockBytes)},
		{"endless empty records", container(nulls, "null", block(1<<40, nil)), "claims 1099511627776 records in 0 bytes"},
		{"a wrong sync marker", badSync, "does not end with the file's sync marker"},
		{"a record past its block", container(longs, "null", block(2, zz(5))), "no valid number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readAll(t, tc.file)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	// Within the bounds a file of null records reads.
	got, err := readAll(t, container(nulls, "null", block(3, nil)))
	if err != nil || len(got) != 3 {
		t.Fatalf("three null records: %v, %v", got, err)
	}
	if _, err := readAll(t, []byte("nope")); !errors.Is(err, ErrContainer) {
		t.Fatalf("not a container: %v", err)
	}
}
