package avrorow

import (
	"errors"
	"fmt"

	"github.com/hamba/avro/v2"
)

// A payload is one Avro value without a container (Beam's schemaless
// Pub/Sub messages): its writer's schema is the reader's, given in the
// pipeline.

// MaxElements bounds the array items and map entries one payload may
// declare, all arrays and maps together (see also MaxEmptyItems): a
// count is read before its items, so without bounds a few bytes could
// ask a decoder for billions of them.
const MaxElements = 1 << 20

// ErrMalformed is the class of payloads that are not a value of the
// schema.
var ErrMalformed = errors.New("not an Avro value of the schema")

// Parse reads an Avro record schema from its JSON text. Each schema gets
// a cache of named types of its own: two pipelines that give different
// records one name do not meet.
func Parse(text string) (*avro.RecordSchema, error) {
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("not an Avro schema: %w", err)
	}
	rs, ok := s.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("an Avro schema of %s values, not a record: rows are read from records", s.Type())
	}
	return rs, nil
}

// maxDepth bounds the nesting a payload's value may have (a recursive
// schema's value could otherwise nest as deep as its bytes allow).
const maxDepth = 64
