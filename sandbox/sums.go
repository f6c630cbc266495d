package sandbox

import (
	"strconv"

	"github.com/weir-dev/weir/internal/jsonscan"
)

// flatSums is a reusable scratch for addMessageNumbers: the numeric
// top-level fields of one message.
type flatSums struct {
	keys []string
	vals []float64
}

// addMessageNumbers adds the numeric top-level fields of a message's JSON
// object payload to sums, as addNumbers(sums, decodeObject(data)) does,
// without building the object: a flat object of plain keys is scanned
// once; anything else (escaped keys, a repeated key, malformed JSON) goes
// through encoding/json.
func (f *flatSums) addMessageNumbers(sums map[string]float64, data []byte) {
	if f.scan(data) {
		for i, k := range f.keys {
			sums[k] += f.vals[i]
		}
		return
	}
	addNumbers(sums, decodeObject(data))
}

// scan reads data as a JSON object into f's numeric fields; false when it
// cannot say exactly what encoding/json would.
func (f *flatSums) scan(b []byte) bool {
	f.keys, f.vals = f.keys[:0], f.vals[:0]
	i := jsonscan.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return jsonscan.SkipSpace(b, i+1) == len(b)
	}
	for {
		key, end, ok := jsonscan.StringAt(b, i) // a plain key (no escapes)
		if !ok {
			return false
		}
		i = jsonscan.SkipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = jsonscan.SkipSpace(b, i+1)
		start := i
		if i = skipValue(b, i); i < 0 {
			return false
		}
		if c := b[start]; c == '-' || c >= '0' && c <= '9' {
			v, err := strconv.ParseFloat(string(b[start:i]), 64)
			for _, k := range f.keys {
				if k == string(key) {
					return false // a repeated key: encoding/json keeps the last
				}
			}
			if err == nil {
				f.keys, f.vals = append(f.keys, string(key)), append(f.vals, v)
			}
		}
		i = jsonscan.SkipSpace(b, i)
		switch {
		case i < len(b) && b[i] == ',':
			i = jsonscan.SkipSpace(b, i+1)
		case i < len(b) && b[i] == '}':
			return jsonscan.SkipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

// skipValue returns the end of the JSON value at b[i:] that scan accepts
// (a number, a string — escapes skipped, its content is not read — true,
// false, null); -1 for anything else.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c == '"':
		for j := i + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return -1
	case c == '-' || c >= '0' && c <= '9':
		j := jsonscan.NumberEnd(b, i)
		if !jsonscan.Number(b[i:j]) {
			return -1
		}
		return j
	}
	for _, lit := range []string{"true", "false", "null"} {
		if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
			return i + len(lit)
		}
	}
	return -1
}
