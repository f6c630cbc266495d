// Package jinja renders Beam YAML pipeline files as Jinja templates before
// they are parsed, as Beam does (apache_beam.yaml.main --jinja_variables):
// variables, filters, if/for/set, macros, {% include %}, {% import %} and
// {% from %}, with Beam's StrictUndefined, on github.com/ardanlabs/jinja.
// Every render runs within budgets (see Limits).
//
// It may import github.com/ardanlabs/jinja and the standard library.
package jinja

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	ajinja "github.com/ardanlabs/jinja"
)

// Beam YAML renders a pipeline file as a Jinja template before parsing it
// (apache_beam.yaml.main --jinja_variables), so one file can serve several
// environments and share pieces through {% include %} and {% import %}.
// weir does the same with github.com/ardanlabs/jinja, a Go Jinja engine:
// variables, filters, if/for/set and macros. {% include 'file' %},
// {% import 'file' as name %} and {% from 'file' import a, b %} are
// expanded by weir before rendering, with paths resolved as Beam's
// (include.go). As with Beam's StrictUndefined, a template that uses an
// undefined variable fails to render (strict.go). Every render runs within
// budgets (limits.go).

// Error is a problem in a template, at a position. Its text is
// "file:line:column: message".
type Error struct {
	File string
	Line int
	Col  int
	Msg  string
	// Err is the underlying error, if any (not sent by a Sandbox's child).
	Err error `json:"-"`
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg) }

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ErrBudgetExceeded marks the errors of a render that passed one of its
// budgets (see Limits).
var ErrBudgetExceeded = errors.New("a budget of the pipeline's loading was exceeded")

// maxJinjaDepth bounds nested includes and imports.
const maxJinjaDepth = 16

var (
	jinjaMarker = regexp.MustCompile(`\{\{|\{%|\{#`)
	jinjaMacro  = regexp.MustCompile(`(?s)\{%-?\s*macro\s+(\w+)\s*\(.*?\{%-?\s*endmacro\s*-?%\}`)
	jinjaTag    = regexp.MustCompile(`(?s)\{\{.*?\}\}|\{%.*?%\}`)
	jinjaLine   = regexp.MustCompile(`line (\d+)`)
)

// Has says whether src uses Jinja syntax ({{ }}, {% %} or {# #}).
func Has(src []byte) bool { return jinjaMarker.Match(src) }

// Options of a render.
type Options struct {
	// Vars are the Jinja variables (Beam's --jinja_variables).
	Vars map[string]any
	// Inline refuses {% include %}, {% import %} and {% from %}: the
	// template came over the wire, and a server reads no file a template
	// it is sent names (see RenderInline).
	Inline bool
	// Limits are the render's budgets; the zero value means
	// DefaultLimits.
	Limits Limits
	// Sandbox, when set, renders in a child process (see Sandbox).
	Sandbox *Sandbox
	// BaseDir is the directory relative include, import and from paths
	// resolve from first, as Beam's do from its working directory
	// (default: the current directory); see expander.
	BaseDir string
}

// Render renders the pipeline file src (named filename) with the
// Jinja variables vars, as Beam YAML does before parsing, in this
// process. Errors name the file and line.
func Render(filename string, src []byte, vars map[string]any) ([]byte, error) {
	return RenderWith(context.Background(), filename, src, Options{Vars: vars})
}

// RenderWith renders the pipeline file src (named filename) as opts say,
// within opts.Limits. Errors name the file and line; a budget's match
// ErrBudgetExceeded.
func RenderWith(ctx context.Context, filename string, src []byte, opts Options) ([]byte, error) {
	if opts.Limits == (Limits{}) {
		opts.Limits = DefaultLimits()
	}
	if opts.Sandbox != nil {
		return opts.Sandbox.render(ctx, filename, src, opts)
	}
	return render(filename, src, opts)
}

// render renders in this process.
func render(filename string, src []byte, opts Options) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, &Error{File: filename, Line: 1, Col: 1, Msg: fmt.Sprintf("Jinja: the template could not be rendered (%v)", r)}
		}
	}()
	if opts.Inline {
		if err := refuseFiles(filename, string(src)); err != nil {
			return nil, err
		}
	}
	names := newJinjaNames()
	names.scan(filename, string(src))
	text, err := (&expander{base: opts.BaseDir, names: names}).expand(filename, string(src), 0)
	if err != nil {
		return nil, err
	}
	if err := refuseRecursion(filename, text); err != nil {
		return nil, err
	}
	t, err := ajinja.Compile(text)
	if err != nil {
		return nil, jinjaErr(filename, err, "Jinja template")
	}
	vars := opts.Vars
	if vars == nil {
		vars = map[string]any{}
	}
	lim := opts.Limits
	run := func(vars map[string]any) (string, error) {
		vals := make(map[string]ajinja.Value, len(vars)+1)
		for k, v := range vars {
			vals[k] = ajinja.FromGoValue(v)
		}
		left := lim.RangeItems
		vals["range"] = rangeFn(&left, lim.RangeItems)
		s, err := t.RenderValues(vals)
		if err == nil && len(s) > lim.OutputBytes {
			err = &LimitError{Limit: "jinja_output_bytes", Value: fmt.Sprint(lim.OutputBytes)}
		}
		return s, err
	}
	s, err := run(vars)
	var le *LimitError
	if errors.As(err, &le) {
		return nil, budgetError(filename, le, "the template renders too much")
	}
	if err != nil {
		return nil, jinjaErr(filename, err, "rendering the Jinja template")
	}
	if err := names.strictCheck(vars, run); err != nil {
		return nil, err
	}
	return []byte(s), nil
}

// ParseVariables reads --jinja_variables: a JSON object.
func ParseVariables(s string) (map[string]any, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var vars map[string]any
	dec := jsonDecoder(s)
	if err := dec.Decode(&vars); err != nil || vars == nil {
		if err == nil {
			err = fmt.Errorf("null")
		}
		return nil, fmt.Errorf("jinja variables must be a JSON object such as {\"env\": \"prod\"}: %w", err)
	}
	return normalizeVars(vars), nil
}

// jinjaErr positions a Jinja error at the line it names.
func jinjaErr(filename string, err error, what string) error {
	line := 1
	if m := jinjaLine.FindStringSubmatch(err.Error()); m != nil {
		if n, e := strconv.Atoi(m[1]); e == nil && n > 0 {
			line = n
		}
	}
	return &Error{File: filename, Line: line, Col: 1, Err: err, Msg: fmt.Sprintf("%s: %v", what, err)}
}

// lineAt is the 1-based line of offset i in s.
func lineAt(s string, i int) int { return 1 + strings.Count(s[:i], "\n") }

// jsonDecoder decodes s keeping numbers exact.
func jsonDecoder(s string) *json.Decoder {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	return dec
}

// normalizeVars turns JSON numbers into ints where they are integers (as
// Python's json.loads does) and floats otherwise.
func normalizeVars(v map[string]any) map[string]any {
	for k, x := range v {
		v[k] = normalizeVar(x)
	}
	return v
}

func normalizeVar(x any) any {
	switch y := x.(type) {
	case json.Number:
		if n, err := y.Int64(); err == nil {
			return int(n)
		}
		f, _ := y.Float64()
		return f
	case map[string]any:
		return normalizeVars(y)
	case []any:
		for i := range y {
			y[i] = normalizeVar(y[i])
		}
	}
	return x
}

// RenderIf renders src as RenderWith does when it is a template or
// variables are given, and returns it as it is otherwise.
func RenderIf(ctx context.Context, filename string, src []byte, opts Options) ([]byte, error) {
	if opts.Vars == nil && !Has(src) {
		return src, nil
	}
	return RenderWith(ctx, filename, src, opts)
}
