package pubsub

// The message formats: their names as pipelines write them, and the rows
// the raw and string formats read.

import (
	"fmt"
	"strings"

	"github.com/weir-dev/weir/row"
)

// Format is how message payloads are read and written.
type Format int

// Message formats.
const (
	// FormatJSON: one JSON object per message, read into a row of the
	// configured schema (fields not in the schema are ignored, missing ones
	// are null) and written from a row.
	FormatJSON Format = iota
	// FormatRaw: the payload as it is. The source produces rows of
	// RawSchema; the sink publishes []byte, string, or the data field of a
	// row.
	FormatRaw
	// FormatString: the payload as UTF-8 text, Beam's STRING format. The
	// source produces rows of StringSchema (a payload that is not UTF-8
	// is a malformed_payload reject); the sink publishes a row's one
	// string field, as FormatRaw does.
	FormatString
	// FormatAvro: one Avro record per message, without a container (Beam's
	// AVRO format: the writer's schema is the reader's), read into a row of
	// its fields (SourceConfig.AvroSchema) and written from a row with a
	// given schema or one inferred from the rows (SinkConfig.AvroSchema).
	// A payload that is not a value of the schema is a malformed_payload
	// reject.
	FormatAvro
)

// ParseFormat reads a format as written in pipeline files: json, raw,
// string or avro (Beam's names, JSON, RAW, STRING and AVRO, in any case).
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "json":
		return FormatJSON, nil
	case "raw", "bytes":
		return FormatRaw, nil
	case "string":
		return FormatString, nil
	case "avro":
		return FormatAvro, nil
	case "proto":
		return 0, fmt.Errorf("format %q is not supported (it needs the messages' protocol buffer descriptors): publish JSON or Avro, or read the payload with format raw: %w", s, ErrInvalidConfig)
	}
	return 0, fmt.Errorf("format %q: want json, raw, string or avro: %w", s, ErrInvalidConfig)
}

// String returns the format's name.
func (f Format) String() string {
	switch f {
	case FormatRaw:
		return "raw"
	case FormatString:
		return "string"
	case FormatAvro:
		return "avro"
	}
	return "json"
}

// rawSchema is built once and never modified.
var rawSchema = row.MustSchema(
	row.Field{Name: "data", Type: row.Of(row.KindString)},
	row.Field{Name: "attributes", Type: row.Of(row.KindAny)},
	row.Field{Name: "id", Type: row.Of(row.KindString)},
	row.Field{Name: "publish_time", Type: row.Of(row.KindTimestamp)},
)

// stringSchema is built once and never modified.
var stringSchema = row.MustSchema(row.Field{Name: "payload", Type: row.Of(row.KindString)})

// StringSchema is the schema of the rows a string-format source produces:
// {payload: string}, as Beam's STRING format reads a message. The schema
// is shared: do not modify it.
func StringSchema() *row.Schema { return stringSchema }

// RawSchema is the schema of the rows a raw-format source produces:
// {data: string, attributes: any (a map of strings), id: string (the
// message ID, or null), publish_time: timestamp}. The schema is shared: do
// not modify it.
func RawSchema() *row.Schema { return rawSchema }
