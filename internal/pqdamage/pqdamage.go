// Package pqdamage damages Parquet files the ways the tests of their
// readers need: a page header rewritten in place, the rest of the file
// untouched. It is for tests.
//
// It may import io/parquetcheck, github.com/parquet-go/parquet-go (its
// format and encoding/thrift packages) and the standard library.
package pqdamage

import (
	"bytes"
	"fmt"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/weir-dev/weir/io/parquetcheck"
)

// RewritePage returns a copy of the Parquet file b whose first data page
// of column (of the first row group) has its header changed by change. The
// changed header must keep its length, so that every offset of the file
// stays true.
func RewritePage(b []byte, column int, change func(*format.PageHeader)) ([]byte, error) {
	md, err := parquetcheck.File(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, err
	}
	if len(md.RowGroups) == 0 || column >= len(md.RowGroups[0].Columns) {
		return nil, fmt.Errorf("the file has no column %d in a first row group", column)
	}
	off := md.RowGroups[0].Columns[column].MetaData.DataPageOffset
	p, err := parquetcheck.PageHeader(b[off:], false)
	if err != nil {
		return nil, err
	}
	var h format.PageHeader
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), b[off:off+int64(p.HeaderLen)], &h); err != nil {
		return nil, err
	}
	change(&h)
	nh, err := thrift.Marshal(new(thrift.CompactProtocol), &h)
	if err != nil {
		return nil, err
	}
	if len(nh) != p.HeaderLen {
		return nil, fmt.Errorf("the changed header is %d bytes, the header %d", len(nh), p.HeaderLen)
	}
	out := bytes.Clone(b)
	copy(out[off:], nh)
	return out, nil
}

// SetEncoding returns a copy of b whose first data page of column states
// the encoding enc.
func SetEncoding(b []byte, column int, enc format.Encoding) ([]byte, error) {
	var typ format.PageType = -1
	out, err := RewritePage(b, column, func(h *format.PageHeader) {
		typ = h.Type
		switch {
		case h.DataPageHeaderV2.Valid:
			h.DataPageHeaderV2.V.Encoding = enc
		case h.DataPageHeader.Valid:
			h.DataPageHeader.V.Encoding = enc
		}
	})
	if err == nil && typ != format.DataPage && typ != format.DataPageV2 {
		return nil, fmt.Errorf("the first page of column %d is a %v page", column, typ)
	}
	return out, err
}
