package sqlsink

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/weir-dev/weir/row"
)

// colKind is the storage kind of a column.
type colKind uint8

const (
	kInt colKind = iota + 1
	kFloat
	kBool
	kText
	kTime
	kJSON
)

// String names the kind as the row type it stores.
func (k colKind) String() string {
	switch k {
	case kInt:
		return "int"
	case kFloat:
		return "float"
	case kBool:
		return "bool"
	case kText:
		return "string"
	case kTime:
		return "timestamp"
	case kJSON:
		return "json"
	}
	return "unknown"
}

// role says where a column's value comes from.
type role uint8

const (
	roleField       role = iota // a row field, by schema index
	roleWindowStart             // the row's window_start field, or the element's window
	roleWindowEnd
	rolePaneIndex // the row's pane field, or the element's pane
	rolePaneTiming
	rolePaneFirst
	rolePaneLast
	rolePaneCutShort // the element's pane: the pane row carries no such field
	roleElementID    // append mode: the element's identity
	// The columns below are not carried in records: the commit adds them.
	roleGeneration
	roleJobID
	roleUpdatedAt
)

// Bookkeeping column names.
const (
	colWindowStart = "window_start"
	colWindowEnd   = "window_end"
	colPane        = "pane"
	colPaneIndex   = "pane_index"
	colPaneTiming  = "pane_timing"
	colPaneFirst   = "pane_is_first"
	colPaneLast    = "pane_is_last"
	colPaneCut     = "pane_cut_short"
	colGeneration  = "generation"
	colJobID       = "job_id"
	colUpdatedAt   = "updated_at"
	colElementID   = "element_id"
)

// column is one column of the sink's table.
type column struct {
	name    string
	kind    colKind
	role    role
	field   int // schema index of the source field, -1 if none
	key     bool
	notNull bool
}

// layout maps a row schema onto table columns. It is immutable after
// newLayout.
type layout struct {
	table  string
	upsert bool
	cols   []column // record columns first, then the bookkeeping ones
	nrec   int      // how many leading columns records carry
	keys   []int    // indices of the conflict-key columns (upsert) or element_id
	// pane is the schema index of the row's pane field (-1: use the
	// element's pane) and paneSub the indices of index, timing, is_first,
	// is_last inside it (-1 when missing).
	pane    int
	paneSub [4]int
	byName  map[string]int
	// postgres says the table is on PostgreSQL (else SQLite): it decides
	// which values a column cannot hold (checkRange).
	postgres bool
}

func kindOf(t row.Type) colKind {
	switch t.Kind {
	case row.KindInt:
		return kInt
	case row.KindFloat:
		return kFloat
	case row.KindBool:
		return kBool
	case row.KindString:
		return kText
	case row.KindTimestamp:
		return kTime
	}
	return kJSON
}

// isPaneRow reports whether t is the pane row of windowed records.
func isPaneRow(t row.Type) bool {
	return t.Kind == row.KindRow && t.Row != nil && t.Row.Index("index") >= 0
}

func newLayout(cfg *Config, s *row.Schema) (*layout, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: table %s: the sink needs the schema of its input rows", ErrConfig, cfg.Table)
	}
	l := &layout{table: cfg.Table, upsert: cfg.Mode == ModeUpsert, pane: -1, byName: map[string]int{}, postgres: cfg.Driver == DriverPostgres}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: table %s: %s", ErrConfig, cfg.Table, fmt.Sprintf(format, args...))
	}
	add := func(c column) error {
		if _, dup := l.byName[strings.ToLower(c.name)]; dup {
			return bad("column %q would appear twice (is a field named like a bookkeeping column: %s?)", c.name,
				"pane_index, pane_timing, pane_is_first, pane_is_last, pane_cut_short, generation, job_id, updated_at, element_id")
		}
		l.byName[strings.ToLower(c.name)] = len(l.cols)
		l.cols = append(l.cols, c)
		return nil
	}
	addPane := func(field int) error {
		l.pane = field
		for _, c := range []column{
			{name: colPaneIndex, kind: kInt, role: rolePaneIndex},
			{name: colPaneTiming, kind: kText, role: rolePaneTiming},
			{name: colPaneFirst, kind: kBool, role: rolePaneFirst},
			{name: colPaneLast, kind: kBool, role: rolePaneLast},
			// Nullable: a table made before the column existed gains it
			// by ALTER TABLE, and its old rows (null) count as complete.
			{name: colPaneCut, kind: kBool, role: rolePaneCutShort},
		} {
			c.field = field
			c.notNull = l.upsert && c.role != rolePaneCutShort
			if err := add(c); err != nil {
				return err
			}
		}
		return nil
	}
	keySet := map[string]bool{}
	for _, k := range cfg.Key {
		i := s.Index(k)
		if i < 0 {
			return nil, bad("key field %q is not a field of the input (%s)", k, s)
		}
		switch s.Fields[i].Type.Kind {
		case row.KindInt, row.KindFloat, row.KindBool, row.KindString, row.KindTimestamp:
		default:
			return nil, bad("key field %q has type %s; keys must be int, float, bool, string or timestamp", k, s.Fields[i].Type)
		}
		if l.upsert && (k == colWindowStart || k == colWindowEnd || k == colPane) {
			return nil, bad("key field %q: the window is always part of an upsert key; list only the grouping fields", k)
		}
		keySet[k] = true
	}
	haveStart, haveEnd := false, false
	for i, f := range s.Fields {
		switch {
		case f.Name == colPane && isPaneRow(f.Type):
			if err := addPane(i); err != nil {
				return nil, err
			}
			sub := f.Type.Row
			for j, n := range []string{"index", "timing", "is_first", "is_last"} {
				l.paneSub[j] = sub.Index(n)
			}
			continue
		case l.upsert && f.Name == colPane:
			return nil, bad("field pane has type %s; upsert expects the pane row {index, timing, is_first, is_last} of windowed results", f.Type)
		case l.upsert && (f.Name == colWindowStart || f.Name == colWindowEnd):
			if f.Type.Kind != row.KindTimestamp {
				return nil, bad("field %s has type %s; upsert expects a timestamp (null for the global window)", f.Name, f.Type)
			}
			r := roleWindowStart
			haveStart = haveStart || f.Name == colWindowStart
			if f.Name == colWindowEnd {
				r = roleWindowEnd
				haveEnd = true
			}
			if err := add(column{name: f.Name, kind: kTime, role: r, field: i}); err != nil {
				return nil, err
			}
			continue
		}
		c := column{name: f.Name, kind: kindOf(f.Type), role: roleField, field: i}
		if keySet[f.Name] {
			c.key, c.notNull = true, true
		}
		if err := add(c); err != nil {
			return nil, err
		}
	}
	if l.upsert {
		if !haveStart {
			if err := add(column{name: colWindowStart, kind: kTime, role: roleWindowStart, field: -1}); err != nil {
				return nil, err
			}
		}
		if !haveEnd {
			if err := add(column{name: colWindowEnd, kind: kTime, role: roleWindowEnd, field: -1}); err != nil {
				return nil, err
			}
		}
		if l.pane < 0 {
			if err := addPane(-1); err != nil {
				return nil, err
			}
		}
		// The conflict key: the key fields in Config order, then the window.
		for _, k := range cfg.Key {
			l.keys = append(l.keys, l.byName[strings.ToLower(k)])
		}
		l.keys = append(l.keys, l.byName[colWindowStart], l.byName[colWindowEnd])
		l.nrec = len(l.cols)
		for _, c := range []column{
			{name: colGeneration, kind: kInt, role: roleGeneration, field: -1, notNull: true},
			{name: colJobID, kind: kText, role: roleJobID, field: -1, notNull: true},
			{name: colUpdatedAt, kind: kTime, role: roleUpdatedAt, field: -1, notNull: true},
		} {
			if err := add(c); err != nil {
				return nil, err
			}
		}
		return l, nil
	}
	if err := add(column{name: colElementID, kind: kText, role: roleElementID, field: -1, notNull: true, key: true}); err != nil {
		return nil, err
	}
	l.keys = []int{len(l.cols) - 1}
	l.nrec = len(l.cols)
	return l, nil
}

// keyHash identifies the conflict key (mode and column list), to name its
// unique index.
func (l *layout) keyHash() string {
	h := sha256.New()
	if l.upsert {
		h.Write([]byte("upsert"))
	} else {
		h.Write([]byte("append"))
	}
	for _, k := range l.keys {
		h.Write([]byte{0})
		h.Write([]byte(l.cols[k].name))
	}
	return hex.EncodeToString(h.Sum(nil)[:4])
}

// keyNames returns the names of the conflict-key columns, for messages.
func (l *layout) keyNames() string {
	names := make([]string, len(l.keys))
	for i, k := range l.keys {
		names[i] = l.cols[k].name
	}
	return strings.Join(names, ", ")
}

// quoteIdent quotes a SQL identifier (both dialects use double quotes).
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// quoteTable quotes a possibly schema-qualified table name.
func quoteTable(t string) string {
	parts := strings.Split(t, ".")
	for i, p := range parts {
		parts[i] = quoteIdent(p)
	}
	return strings.Join(parts, ".")
}

// splitTable returns the schema (empty when unqualified) and the bare name.
func splitTable(t string) (schema, name string) {
	if i := strings.IndexByte(t, '.'); i >= 0 {
		return t[:i], t[i+1:]
	}
	return "", t
}

// keyIndexPrefix is the prefix of the names of the sink's unique indexes on
// table t; indexName adds the key hash. Both fit PostgreSQL's 63 bytes. A
// name longer than 40 bytes keeps its first 31 and a hash of the whole
// name, so that tables sharing a long prefix (a façade's generations:
// orders__g1, orders__g2) never share an index name.
func keyIndexPrefix(t string) string {
	_, name := splitTable(t)
	if len(name) > 40 {
		h := sha256.Sum256([]byte(name))
		name = name[:31] + "_" + hex.EncodeToString(h[:4])
	}
	return name + "_weir_key_"
}

func (l *layout) indexName() string { return keyIndexPrefix(l.table) + l.keyHash() }

// BookkeepingColumns returns the columns the sink adds to a table besides
// the records' own fields and the window (the pane, the revision's
// generation, job_id, updated_at, element_id): what a comparison of two
// outputs (weir diff) leaves out of the compared values.
func BookkeepingColumns() []string {
	return []string{colPane, colPaneIndex, colPaneTiming, colPaneFirst, colPaneLast, colPaneCut, colGeneration, colJobID, colUpdatedAt, colElementID}
}

// KeyIndexPrefix returns the prefix of the name of the sink's unique
// index on table (schema-qualified or not); the index's plain columns are
// the sink's declared key fields.
func KeyIndexPrefix(table string) string { return keyIndexPrefix(table) }
