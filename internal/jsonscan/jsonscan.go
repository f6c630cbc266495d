// Package jsonscan holds the small pieces of JSON scanning that the fast
// readers of rows (package row), of Go SDK accumulators and of a
// rehearsal's input sums (package sandbox) share: what a plain number and
// a plain string are, where they end, and whitespace. Each fast reader
// reads only what it can read exactly as encoding/json does and leaves the
// rest to encoding/json; these helpers say what "plain" is.
//
// It may import only the standard library.
package jsonscan

import "unicode/utf8"

// PlainString reports whether b, the content between a JSON string's
// quotes, needs no decoding: no escapes, no control characters, valid
// UTF-8 (encoding/json returns such content as it is).
func PlainString(b []byte) bool {
	for _, c := range b {
		if c == '\\' || c < 0x20 {
			return false
		}
	}
	return utf8.Valid(b)
}

// Number reports whether b is a number by JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func Number(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		start := i + 1
		if i = digits(b, start); i == start {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		start := i
		if i = digits(b, start); i == start {
			return false
		}
	}
	return i == len(b)
}

// digits returns the end of the run of decimal digits at b[i:].
func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// SkipSpace returns the index of the first byte of b[i:] that is not JSON
// whitespace (len(b) when there is none).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// StringAt reads the JSON string at b[i:] when it has no escapes and is
// valid UTF-8 (what encoding/json returns as it is), returning its bytes
// and where it ends; ok is false for anything else.
func StringAt(b []byte, i int) (s []byte, end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			s := b[i+1 : j]
			return s, j + 1, PlainString(s)
		case c == '\\':
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// NumberEnd returns where the number-like token at b[i:] ends (digits,
// signs, '.', 'e', 'E'); whether it is a number is Number's to say.
func NumberEnd(b []byte, i int) int {
	for i < len(b) {
		switch c := b[i]; {
		case '0' <= c && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			i++
		default:
			return i
		}
	}
	return i
}
