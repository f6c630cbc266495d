package compat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/weir-dev/weir/graph"
)

// Mapping maps step-name prefixes of the running pipeline (OLD) to step-name
// prefixes of the new one, as --transform-name-mapping gives them.
//
// Keys and values are matched on '/' boundaries and the longest matching key
// wins: {"Parse": "Ingest"} maps Parse to Ingest and Parse/Validate to
// Ingest/Validate, but leaves ParseX alone. A value of "" declares the steps
// under the key deleted on purpose: their state is dropped and listed in the
// report's dropped_state. A step no key matches keeps its name.
type Mapping map[string]string

// ParseMapping reads a mapping from its JSON form, a JSON object of strings
// such as {"CountByUser":"CountByUserId","Debug":""}. Empty (or blank) text
// is the empty mapping. Keys must be valid step names; values valid step
// names or "". A key given twice is an error rather than a silent override.
func ParseMapping(text string) (Mapping, error) {
	m := Mapping{}
	if strings.TrimSpace(text) == "" {
		return m, nil
	}
	dec := json.NewDecoder(strings.NewReader(text))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("transform name mapping is not valid JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf(`transform name mapping must be a JSON object of step names, such as {"OldName":"NewName"}`)
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("transform name mapping is not valid JSON: %w", err)
		}
		key, _ := kt.(string) // object keys are always strings
		vt, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("transform name mapping is not valid JSON: %w", err)
		}
		val, ok := vt.(string)
		if !ok {
			return nil, fmt.Errorf(`transform name mapping: the value of %q must be a string (the new step name, or "" to drop the step's state on purpose)`, key)
		}
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("transform name mapping: step %q is mapped twice", key)
		}
		if err := graph.ValidateName(key); err != nil {
			return nil, fmt.Errorf("transform name mapping: key: %w", err)
		}
		if val != "" {
			if err := graph.ValidateName(val); err != nil {
				return nil, fmt.Errorf("transform name mapping: value of %q: %w", key, err)
			}
		}
		m[key] = val
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("transform name mapping is not valid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("transform name mapping: unexpected text after the JSON object")
	}
	return m, nil
}

// String returns the mapping as compact JSON with sorted keys, the form
// --transform-name-mapping takes.
func (m Mapping) String() string {
	if m == nil {
		return "{}"
	}
	b, err := json.Marshal(map[string]string(m))
	if err != nil { // unreachable: a map of strings always marshals
		return "{}"
	}
	return string(b)
}

// Rename returns the new name of the OLD step name under m. applied is
// false when no key matches (the step keeps its name, returned as is). When
// a key matches, key is that key and newName is the key's value followed by
// the rest of name; newName is "" when the step is mapped to "" (deleted).
func (m Mapping) Rename(name string) (newName, key string, applied bool) {
	for k := range m {
		if hasPrefix(name, k) && len(k) > len(key) {
			key, applied = k, true
		}
	}
	if !applied {
		return name, "", false
	}
	v := m[key]
	if v == "" {
		return "", key, true
	}
	return v + name[len(key):], key, true
}

// keys returns m's keys sorted.
func (m Mapping) keys() []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// hasPrefix reports whether prefix is name or a '/'-bounded prefix of it.
func hasPrefix(name, prefix string) bool {
	return name == prefix || (strings.HasPrefix(name, prefix) && name[len(prefix)] == '/')
}

// RenameSteps returns byStep (values by a step of OLD) under the names m
// gives those steps in NEW: a step mapped to "" is left out, one not in m
// keeps its name.
func RenameSteps[V any](byStep map[string]V, m Mapping) map[string]V {
	if len(m) == 0 || byStep == nil {
		return byStep
	}
	out := make(map[string]V, len(byStep))
	for name, v := range byStep {
		to, mapped := m[name]
		switch {
		case !mapped:
			out[name] = v
		case to != "":
			out[to] = v
		}
	}
	return out
}
