package sqlquery

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
)

// This file converts values between rows and SQLite: a field's value bound
// as SQLite takes it, and what SQLite returns converted to a column's type.

// bind converts field value v of type t for SQLite.
func bind(v any, t row.Type) (any, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case bool:
		if x {
			return int64(1), nil
		}
		return int64(0), nil
	case mtime.Time:
		return sqlTime(x), nil
	case int64, float64, string:
		return x, nil
	case int:
		return int64(x), nil
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n, nil
		}
		return x.Float64()
	case []byte:
		return x, nil
	}
	switch t.Kind {
	case row.KindTimestamp:
		ts, err := row.ToTimestamp(v)
		if err != nil {
			return nil, err
		}
		return sqlTime(ts), nil
	}
	// Rows, lists and maps: JSON text.
	if r, ok := row.AsRow(v); ok {
		return string(row.AppendJSON(nil, r)), nil
	}
	return string(row.AppendJSONValue(nil, v)), nil
}

// sqlTime is t in timeLayout, as t.ToTime().Format(timeLayout), without
// reading the layout for each value (a tenth of the cost of loading a
// table of timestamps).
func sqlTime(t mtime.Time) string {
	tt := t.ToTime()
	y, mo, d := tt.Date()
	if y < 0 || y > 9999 {
		return tt.Format(timeLayout)
	}
	h, mi, s := tt.Clock()
	var b [len(timeLayout)]byte
	putDigits(b[0:4], y)
	b[4] = '-'
	putDigits(b[5:7], int(mo))
	b[7] = '-'
	putDigits(b[8:10], d)
	b[10] = ' '
	putDigits(b[11:13], h)
	b[13] = ':'
	putDigits(b[14:16], mi)
	b[16] = ':'
	putDigits(b[17:19], s)
	b[19] = '.'
	putDigits(b[20:23], tt.Nanosecond()/1e6)
	return string(b[:])
}

// putDigits writes v's last len(b) decimal digits into b, zero-padded.
func putDigits(b []byte, v int) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
}

// convert converts a value SQLite returned to type t.
func convert(v any, t row.Type) (any, error) {
	switch x := v.(type) {
	case []byte:
		v = string(x)
	case time.Time:
		// The driver reads a TIMESTAMP column's text as a time.
		v = mtime.FromTime(x)
	}
	if v == nil {
		return nil, nil
	}
	switch t.Kind {
	case row.KindInt:
		switch x := v.(type) {
		case int64:
			return x, nil
		case float64:
			if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
				return int64(x), nil
			}
		case string:
			if n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil {
				return n, nil
			}
		}
	case row.KindFloat:
		switch x := v.(type) {
		case float64:
			return x, nil
		case int64:
			return float64(x), nil
		case string:
			if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
				return f, nil
			}
		}
	case row.KindBool:
		switch x := v.(type) {
		case int64:
			return x != 0, nil
		case float64:
			return x != 0, nil
		case bool:
			return x, nil
		}
	case row.KindString:
		switch x := v.(type) {
		case string:
			return x, nil
		case int64:
			return strconv.FormatInt(x, 10), nil
		case float64:
			return strconv.FormatFloat(x, 'g', -1, 64), nil
		}
	case row.KindTimestamp:
		switch x := v.(type) {
		case mtime.Time:
			return x, nil
		case string:
			for _, layout := range []string{timeLayout, "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02", time.RFC3339Nano} {
				if tt, err := time.ParseInLocation(layout, x, time.UTC); err == nil {
					return mtime.FromTime(tt), nil
				}
			}
			return row.ToTimestamp(x)
		case int64:
			return row.ToTimestamp(x)
		}
	case row.KindRow, row.KindList:
		if s, ok := v.(string); ok {
			dec := json.NewDecoder(strings.NewReader(s))
			dec.UseNumber()
			var x any
			if err := dec.Decode(&x); err == nil {
				return row.FromJSON(x, t)
			}
		}
	case row.KindAny:
		return v, nil
	}
	return nil, fmt.Errorf("SQLite returned %v (%s) for a %s column", v, row.GoTypeName(v), t)
}
