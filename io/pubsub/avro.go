package pubsub

// Format avro (Beam's AVRO): the rows an Avro record schema's payloads
// are read into, the source's check of its configuration and its decoding,
// the sink's encoders (package avrorow does the reading and writing).

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hamba/avro/v2"

	"github.com/weir-dev/weir/io/avrorow"
	"github.com/weir-dev/weir/row"
)

// AvroRowSchema returns the schema of the rows an Avro record schema's
// payloads are read into (its JSON text; see package avrorow for the
// types).
func AvroRowSchema(schemaJSON string) (*row.Schema, error) {
	rs, err := avrorow.Parse(schemaJSON)
	if err != nil {
		return nil, err
	}
	return avrorow.RowSchema(rs)
}

// avroRows returns AvroSchema's rows with the attribute fields after
// them, nil when AvroSchema cannot be read (Validate says why).
func (c *SourceConfig) avroRows() *row.Schema {
	s, err := AvroRowSchema(c.AvroSchema)
	if err != nil {
		return nil
	}
	fields := slices.Clone(s.Fields)
	for _, name := range c.AttributeFields {
		fields = append(fields, row.Field{Name: name, Type: row.Of(row.KindString)})
	}
	if c.AttributesMap != "" {
		fields = append(fields, row.Field{Name: c.AttributesMap, Type: row.Of(row.KindAny)})
	}
	if s, err = row.NewSchema(fields...); err != nil {
		return nil
	}
	return s
}

// validateAvro parses AvroSchema (into c.avro) and checks that the rows'
// payload fields, when Schema gives them, are its fields.
func (c *SourceConfig) validateAvro(payload *row.Schema) error {
	if c.AvroSchema == "" {
		return errors.New("format avro needs the payloads' Avro record schema")
	}
	var err error
	if c.avro, err = avrorow.Parse(c.AvroSchema); err != nil {
		return err
	}
	if payload != nil {
		want := make([]string, 0, len(c.avro.Fields()))
		for _, f := range c.avro.Fields() {
			want = append(want, f.Name())
		}
		if !slices.Equal(payload.Names(), want) {
			return fmt.Errorf("the rows' payload fields (%s) are not the Avro schema's (%s)", strings.Join(payload.Names(), ", "), strings.Join(want, ", "))
		}
	}
	return nil
}

// decodeAvro reads an Avro record of the source's schema into a row, as
// decode reads JSON.
func (s *split) decodeAvro(data []byte) (*row.Row, string, string) {
	r := row.New(s.cfg.Schema)
	if err := s.cfg.avroDec.Decode(data, r.Values); err != nil {
		return nil, ReasonMalformedPayload, fmt.Sprintf("the payload is %v (format avro, schema %s)", err, s.cfg.avro.FullName())
	}
	return s.checkRequired(r)
}

// avroEncoder returns the encoder rows of rs are written with: the
// configured schema's, or one of a schema inferred from rs's fields but
// those at omit (the attribute fields).
func (s *Sink) avroEncoder(rs *row.Schema, omit []int) (*avrorow.Encoder, error) {
	if s.avro != nil {
		return s.avro, nil
	}
	if last := s.inferred.Load(); last != nil && last.rows == rs {
		return last.enc, nil
	}
	fields := make([]row.Field, 0, rs.Len())
	for i, f := range rs.Fields {
		if !slices.Contains(omit, i) {
			fields = append(fields, f)
		}
	}
	payload, err := row.NewSchema(fields...)
	if err != nil {
		return nil, err
	}
	as, err := avrorow.SchemaOf(payload)
	if err != nil {
		return nil, fmt.Errorf("the rows %s have no Avro schema: %w", rs, err)
	}
	enc, err := avrorow.NewEncoder(as.(*avro.RecordSchema))
	if err != nil {
		return nil, fmt.Errorf("the rows %s have no Avro schema: %w", rs, err)
	}
	s.inferred.Store(&inferredAvro{rows: rs, enc: enc})
	return enc, nil
}

// inferredAvro is the encoder of the Avro schema inferred for rows of one
// schema.
type inferredAvro struct {
	rows *row.Schema
	enc  *avrorow.Encoder
}
