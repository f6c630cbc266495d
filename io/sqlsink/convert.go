package sqlsink

import (
	"fmt"
	"strings"
)

// A column's type may change under a staged table's view (see the package
// documentation, "Converting a column"): the newest member's type is the
// view's, and every older member's values are served converted to it.
// Three kinds of change exist. A widening (int to float) needs no
// declaration. A lossless conversion (an int, a float or a timestamp to a
// string) and a lossy one (a string to an int or a float, which reads
// null where the string is not a number; a float to an int, truncated)
// need Config.Convert, the lossy ones with allow_lossy. servedAs writes
// the view's and the merges' term for each; the rules depend only on the
// members' declared types, so a merge run by hand (MergeStaged), which has
// no sink's Config, serves and moves rows as the sink's view does.

// declKind is the storage kind of a column declared decl, as far as a
// conversion needs it: zero for a type no conversion reads (a JSON, a
// SQLite column without affinity). On SQLite a bool is an INTEGER and
// reads as an int, and a timestamp is TEXT.
func declKind(decl string, pg bool) colKind {
	d := strings.ToLower(strings.TrimSpace(decl))
	if !pg {
		switch affinity(d) {
		case "INTEGER":
			return kInt
		case "REAL":
			return kFloat
		case "TEXT":
			return kText
		}
		return 0
	}
	switch d {
	case "bigint", "integer", "smallint":
		return kInt
	case "double precision", "real":
		return kFloat
	case "text", "character varying":
		return kText
	case "timestamp with time zone":
		return kTime
	case "boolean":
		return kBool
	}
	return 0
}

// conversion says whether a column of kind from may be served as kind to
// behind a staged table's view: ok, and whether the conversion loses
// information (lossy) and so needs allow_lossy. A widening (int to float)
// and an equal kind are not conversions (ok false).
func conversion(from, to colKind) (lossy, ok bool) {
	switch {
	case to == kText && (from == kInt || from == kFloat || from == kTime):
		return false, true
	case from == kText && (to == kInt || to == kFloat):
		return true, true
	case from == kFloat && to == kInt:
		return true, true
	}
	return false, false
}

// converts reports whether a member's column declared decl is served
// converted under the view's type typ (servedAs changes it).
func converts(decl, typ string, pg bool) bool {
	_, ok := conversion(declKind(decl, pg), declKind(typ, pg))
	return ok
}

// servedAs is the view's (and a merge's) term for column q of a member,
// declared decl there, served as the type typ (the view's: the newest
// member's). A float under an int (a Combine output narrowed, declared
// allow_lossy) is truncated toward zero, as the state's conversion
// truncates; an int, a float or a timestamp under a string is its text (a
// timestamp in RFC 3339, UTC); a string under an int or a float is the
// number it spells, or null where it spells none (or one out of the
// type's range). Any other column is served as it is.
func servedAs(q, decl, typ string, pg bool) string {
	from, to := declKind(decl, pg), declKind(typ, pg)
	switch {
	case from == kFloat && to == kInt && pg:
		return "CAST(trunc(" + q + ") AS " + typ + ")"
	case from == kFloat && to == kInt:
		return "CAST(" + q + " AS INTEGER)"
	case to == kText && from == kTime && pg:
		// to_char has no format for "the fraction, if any": .US and its
		// trailing zeros (and a lone dot) are cut.
		return `(regexp_replace(to_char(` + q + ` AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '\.?0+$', '') || 'Z')`
	case to == kText && (from == kInt || from == kFloat):
		return "CAST(" + q + " AS " + typ + ")"
	case from == kText && to == kInt && pg:
		return `(CASE WHEN ` + q + ` ~ '^\s*-?(0|[1-9][0-9]{0,17})\s*$' THEN CAST(trim(` + q + `) AS bigint) END)`
	case from == kText && to == kFloat && pg:
		// JSON's number syntax, its exponent bounded so that no string
		// overflows a double (an error, for every reader of the view).
		return `(CASE WHEN ` + q + ` ~ '^\s*-?(0|[1-9][0-9]{0,199})(\.[0-9]+)?([eE][-+]?[0-9]{1,2})?\s*$' THEN CAST(trim(` + q + `) AS double precision) END)`
	case from == kText && (to == kInt || to == kFloat):
		// SQLite has no regular expressions without an extension that a
		// reader of the view may lack; its JSON functions (built in) tell
		// a number written as JSON writes it. The inner CASE runs only on
		// valid JSON (json_type fails on any other text).
		t := "trim(" + q + ")"
		if to == kInt {
			return "(CASE WHEN json_valid(" + t + ") THEN CASE WHEN json_type(" + t + ") = 'integer' AND length(ltrim(" + t + ", '-')) <= 18 THEN CAST(" + t + " AS INTEGER) END END)"
		}
		return "(CASE WHEN json_valid(" + t + ") THEN CASE WHEN json_type(" + t + ") IN ('integer', 'real') AND abs(CAST(" + t + " AS REAL)) <= 1.7976931348623157e308 THEN CAST(" + t + " AS REAL) END END)"
	}
	return q
}

// movedAs is a merge's term for column q of a member, declared decl
// there, moved into the principal's column declared typ: converted as the
// view serves it where the conversion is lossless (a PostgreSQL principal
// converted to a string by alterPrincipal), as it is otherwise (a lossy
// conversion leaves the principal's column, and so what it holds, as it
// was; SQLite stores a string in an INTEGER column as given, and its view
// serves the column converted).
func movedAs(q, decl, typ string, pg bool) string {
	if lossy, ok := conversion(declKind(decl, pg), declKind(typ, pg)); ok && !lossy {
		return servedAs(q, decl, typ, pg)
	}
	return q
}

// alterPrincipal returns the DDL that changes a merge's principal column
// have to the type of want on PostgreSQL: a widening (bigint to double
// precision, widens) or a lossless conversion to a string (the older
// members' values as the view serves them); "" for none: a lossy
// conversion keeps the principal's values as they are (served converted,
// so a rollback still finds them), and SQLite keeps a column's declared
// type (it stores either as given; its view serves the values converted).
func alterPrincipal(table string, have, want colDecl, pg bool) string {
	if !pg {
		return ""
	}
	if widens(have, want, pg) {
		return "ALTER TABLE " + quoteTable(table) + " ALTER COLUMN " + quoteIdent(have.name) + " TYPE double precision"
	}
	from, to := declKind(have.typ, pg), declKind(want.typ, pg)
	if lossy, ok := conversion(from, to); !ok || lossy {
		return ""
	}
	return "ALTER TABLE " + quoteTable(table) + " ALTER COLUMN " + quoteIdent(have.name) + " TYPE " + want.typ +
		" USING " + servedAs(quoteIdent(have.name), have.typ, want.typ, pg)
}

// checkConversion says whether the sink may write column c, of storage
// kind c.kind, into a staged table whose newest member declares it decl:
// nil for no change, a widening, or a conversion Config.Convert declares
// (with allow_lossy if it is lossy); an error naming the column, the
// change and the fix otherwise. member names the table in the message;
// pg says the backend.
func (s *Sink) checkConversion(c column, decl, member string, pg bool) error {
	be := s.db.be
	if be.compatible(c.kind, decl) || widensToFloat(be, c, decl) {
		return nil
	}
	from := declKind(decl, pg)
	lossy, ok := conversion(from, c.kind)
	if ok && from == kFloat && c.kind == kInt && c.role == roleField && !c.key {
		// A Combine output narrowed, declared allow_lossy on the Combine
		// (the compatibility check refuses it otherwise); a field another
		// step narrows declares it here.
		if _, declared := s.cfg.Convert[c.name]; !declared || s.cfg.Convert[c.name] {
			return nil
		}
	}
	allow, declared := s.cfg.Convert[c.name]
	fromName := from.String()
	if from == 0 {
		fromName = decl
	}
	switch {
	case c.key:
		return fmt.Errorf("%w: %w: table %s, column %s: %s keys its rows by %s %s, the sink writes %s (%s): a key column's type cannot change behind the view (the rows of one key would no longer meet): write to a new table",
			ErrSchemaChange, ErrColumnType, s.cfg.Table, c.name, member, c.name, decl, be.sqlType(c.kind), s.columnPurpose(c))
	case !ok || c.role != roleField:
		return fmt.Errorf("%w: %w: table %s, column %s: %s has type %s, the sink writes %s (%s); "+
			"a staged table converts an int, a float or a timestamp to a string, and a string to an int or a float (declared with convert), and widens an int to a float: keep the type, or write to a new table",
			ErrSchemaChange, ErrColumnType, s.cfg.Table, c.name, member, decl, be.sqlType(c.kind), s.columnPurpose(c))
	case !declared:
		fix := "convert: [" + c.name + "]"
		if lossy {
			fix = "convert: {" + c.name + ": {allow_lossy: true}}"
		}
		return fmt.Errorf("%w: %w: table %s, column %s: %s has type %s, the sink writes %s (%s): %s → %s is a conversion of the rows written before, "+
			"which the view applies when it serves them only where the sink declares it: add %s to the WriteToSql config, or write to a new table",
			ErrSchemaChange, ErrColumnType, s.cfg.Table, c.name, member, decl, be.sqlType(c.kind), s.columnPurpose(c), fromName, c.kind, fix)
	case lossy && !allow:
		return fmt.Errorf("%w: %w: table %s, column %s: %s → %s loses what does not convert (%s): declare it with convert: {%s: {allow_lossy: true}}, or write to a new table",
			ErrSchemaChange, ErrColumnType, s.cfg.Table, c.name, fromName, c.kind, lossText(from, c.kind), c.name)
	}
	return nil
}

// lossText says what a lossy conversion loses.
func lossText(from, to colKind) string {
	if from == kFloat {
		return "a float's fraction: the view truncates toward zero"
	}
	return "a string that is not " + map[colKind]string{kInt: "an integer", kFloat: "a number"}[to] + " reads null"
}
