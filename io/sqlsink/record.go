package sqlsink

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// Records are flat []any slices with one value per record column (layout.nrec
// of them per row). Values are normalised to int64, float64, bool, string
// (JSON text for nested values), mtime.Time or nil.

// Reasons of the rejects of a WriteToSql sink (contract.RejectingSink): why
// the table cannot store a row.
const (
	// ReasonNullKey: a column of the upsert key or of the pane is null.
	ReasonNullKey = "null_key"
	// ReasonWrongType: a value is not of its column's type.
	ReasonWrongType = "wrong_type"
	// ReasonValueOutOfRange: the column's type cannot hold the value (a
	// text with a NUL character on PostgreSQL, a NaN float on SQLite,
	// which would store it as null).
	ReasonValueOutOfRange = "value_out_of_range"
)

// valueError is a row the table cannot store, with the reason of its reject.
type valueError struct {
	reason string
	err    error
}

func (e *valueError) Error() string { return e.err.Error() }

func (e *valueError) Unwrap() error { return e.err }

// convert normalises a field value for a column of kind k.
func convert(v any, k colKind) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch k {
	case kInt:
		switch x := v.(type) {
		case int64:
			return x, nil
		case int:
			return int64(x), nil
		}
	case kFloat:
		switch x := v.(type) {
		case float64:
			return x, nil
		case int64:
			return float64(x), nil
		}
	case kBool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case kText:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case kTime:
		if t, ok := v.(mtime.Time); ok {
			return t, nil
		}
	case kJSON:
		return string(row.AppendJSONValue(nil, v)), nil
	}
	return nil, &valueError{reason: ReasonWrongType, err: fmt.Errorf("want %s, got %s", k, row.GoTypeName(v))}
}

// checkRange reports a converted value its column cannot hold on the
// table's database: PostgreSQL text cannot contain a NUL character, and
// SQLite stores a NaN float as null.
func (l *layout) checkRange(v any) error {
	switch x := v.(type) {
	case string:
		if l.postgres && strings.IndexByte(x, 0) >= 0 {
			return &valueError{reason: ReasonValueOutOfRange, err: errors.New("PostgreSQL text cannot hold the NUL character (\\u0000)")}
		}
	case float64:
		if !l.postgres && math.IsNaN(x) {
			return &valueError{reason: ReasonValueOutOfRange, err: errors.New("SQLite cannot hold NaN (it would store null)")}
		}
	}
	return nil
}

// appendRecord converts one element into record values appended to dst.
func (l *layout) appendRecord(dst []any, e *contract.Element, r *row.Row) ([]any, error) {
	var pane *row.Row
	if l.pane >= 0 {
		pane, _ = r.Values[l.pane].(*row.Row)
	}
	paneVal := func(sub int) any {
		if pane == nil || l.paneSub[sub] < 0 || l.paneSub[sub] >= len(pane.Values) {
			return nil
		}
		return pane.Values[l.paneSub[sub]]
	}
	for i := range l.nrec {
		c := &l.cols[i]
		var v any
		var err error
		switch c.role {
		case roleField:
			v, err = convert(r.Values[c.field], c.kind)
		case roleWindowStart, roleWindowEnd:
			if c.field >= 0 {
				v, err = convert(r.Values[c.field], kTime)
			} else if !e.Window.IsGlobal() {
				v = e.Window.Start
				if c.role == roleWindowEnd {
					v = e.Window.End
				}
			}
		case rolePaneIndex:
			if l.pane < 0 {
				v = e.Pane.Index
			} else {
				v, err = convert(paneVal(0), kInt)
			}
		case rolePaneTiming:
			if l.pane < 0 {
				v = e.Pane.Timing.String()
			} else {
				v, err = convert(paneVal(1), kText)
			}
		case rolePaneFirst:
			if l.pane < 0 {
				v = e.Pane.IsFirst
			} else {
				v, err = convert(paneVal(2), kBool)
			}
		case rolePaneLast:
			if l.pane < 0 {
				v = e.Pane.IsLast
			} else {
				v, err = convert(paneVal(3), kBool)
			}
		case rolePaneCutShort:
			v = e.Pane.CutShort
		case roleElementID:
			// Filled in by the caller, which knows the worker's occurrences.
		}
		if err == nil && v != nil {
			err = l.checkRange(v)
		}
		if err != nil {
			return dst, fmt.Errorf("table %s, column %s: %w", l.table, c.name, err)
		}
		if v == nil && c.notNull && c.role != roleElementID {
			return dst, &valueError{reason: ReasonNullKey, err: fmt.Errorf("table %s, column %s: the value is null, but the column is part of the key (or the pane), which cannot hold null", l.table, c.name)}
		}
		dst = append(dst, v)
	}
	return dst, nil
}

// DefaultElementID is the default identity of an append-mode row: a hash of
// the element's source position (when known), window, pane index and row
// content. It is deterministic across replays. Two identical rows from the
// same source position, window and pane hash alike; the sink then tells them
// apart by their order of arrival on the worker, counted since the last
// PreCommit (or FlushEvery flush): the second gets a "#2" suffix, the third
// "#3". That is deterministic because a source element's outputs reach the
// sink together, in order, on one worker, before the next barrier. Supply
// Config.ElementID instead when rows carry their own identity (an event ID).
func DefaultElementID(e *contract.Element, r *row.Row) (string, error) {
	var buf [8]byte
	h := sha256.New()
	if e.Source != nil {
		h.Write([]byte(e.Source.Source))
		binary.LittleEndian.PutUint64(buf[:], uint64(e.Source.Offset))
		h.Write(buf[:])
	}
	h.Write([]byte{0})
	binary.LittleEndian.PutUint64(buf[:], uint64(e.Window.Start))
	h.Write(buf[:])
	binary.LittleEndian.PutUint64(buf[:], uint64(e.Window.End))
	h.Write(buf[:])
	binary.LittleEndian.PutUint64(buf[:], uint64(e.Pane.Index))
	h.Write(buf[:])
	h.Write(row.AppendJSON(nil, r))
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// Part encoding. See the package documentation.

const partMagic = "wsq1"

// Value tags.
const (
	tagNull byte = iota
	tagInt
	tagFloat
	tagFalse
	tagTrue
	tagString
	tagTime
)

func appendValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, tagNull)
	case int64:
		return binary.AppendVarint(append(b, tagInt), x)
	case float64:
		return binary.LittleEndian.AppendUint64(append(b, tagFloat), math.Float64bits(x))
	case bool:
		if x {
			return append(b, tagTrue)
		}
		return append(b, tagFalse)
	case string:
		b = binary.AppendUvarint(append(b, tagString), uint64(len(x)))
		return append(b, x...)
	case mtime.Time:
		return binary.AppendVarint(append(b, tagTime), int64(x))
	}
	// Records only hold the types above; anything else is a bug upstream,
	// encoded as text so that it is visible rather than lost.
	s := fmt.Sprint(v)
	b = binary.AppendUvarint(append(b, tagString), uint64(len(s)))
	return append(b, s...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// encodePart encodes n records (flat vals) written with the given
// generation and job ID.
func (l *layout) encodePart(generation int64, jobID string, vals []any) []byte {
	b := make([]byte, 0, 64+len(vals)*8)
	b = append(b, partMagic...)
	b = binary.AppendVarint(b, generation)
	b = appendString(b, jobID)
	b = binary.AppendUvarint(b, uint64(l.nrec))
	for i := range l.nrec {
		b = appendString(b, l.cols[i].name)
	}
	b = binary.AppendUvarint(b, uint64(len(vals)/l.nrec))
	for _, v := range vals {
		b = appendValue(b, v)
	}
	return b
}

// part is a decoded part.
type part struct {
	generation int64
	jobID      string
	vals       []any // records in the current layout
}

var errShortPart = errors.New("truncated data")

type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShortPart
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errShortPart
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) str() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = errShortPart
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) value() any {
	if r.err != nil {
		return nil
	}
	if len(r.b) == 0 {
		r.err = errShortPart
		return nil
	}
	tag := r.b[0]
	r.b = r.b[1:]
	switch tag {
	case tagNull:
		return nil
	case tagInt:
		return r.varint()
	case tagFloat:
		if len(r.b) < 8 {
			r.err = errShortPart
			return nil
		}
		f := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
		r.b = r.b[8:]
		return f
	case tagFalse:
		return false
	case tagTrue:
		return true
	case tagString:
		return r.str()
	case tagTime:
		return mtime.Time(r.varint())
	}
	r.err = fmt.Errorf("unknown value tag %d", tag)
	return nil
}

// decodePart decodes a part into the current layout. Columns the part lacks
// are null; a column the layout lacks is an error (the table would lose it).
func (l *layout) decodePart(b []byte) (part, error) {
	if len(b) == 0 {
		return part{}, nil
	}
	fail := func(err error) (part, error) {
		return part{}, fmt.Errorf("decoding pre-committed rows for table %s: %w", l.table, err)
	}
	if len(b) < len(partMagic) || string(b[:len(partMagic)]) != partMagic {
		return fail(errors.New("not a WriteToSql part (bad magic)"))
	}
	r := &reader{b: b[len(partMagic):]}
	p := part{generation: r.varint(), jobID: r.str()}
	ncols := r.uvarint()
	if r.err != nil {
		return fail(r.err)
	}
	if ncols == 0 || ncols > uint64(len(r.b)) {
		return fail(fmt.Errorf("bad column count %d", ncols))
	}
	mapping := make([]int, ncols)
	identity := ncols == uint64(l.nrec)
	for i := range mapping {
		name := r.str()
		j, ok := l.byName[strings.ToLower(name)]
		if r.err == nil && (!ok || j >= l.nrec) {
			return fail(fmt.Errorf("the data has column %s, which the sink no longer writes", name))
		}
		mapping[i] = j
		identity = identity && j == i
	}
	n := r.uvarint()
	if r.err != nil {
		return fail(r.err)
	}
	if n > uint64(len(r.b)) { // every value takes at least one byte
		return fail(fmt.Errorf("bad row count %d", n))
	}
	p.vals = make([]any, int(n)*l.nrec)
	for row := range int(n) {
		rec := p.vals[row*l.nrec : (row+1)*l.nrec]
		for i := range mapping {
			v := r.value()
			if identity {
				rec[i] = v
			} else {
				rec[mapping[i]] = v
			}
		}
	}
	if r.err != nil {
		return fail(r.err)
	}
	if len(r.b) != 0 {
		return fail(errors.New("trailing bytes after the last row"))
	}
	return p, nil
}
