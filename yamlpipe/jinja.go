package yamlpipe

import (
	"context"
	"errors"
	"io"

	"github.com/weir-dev/weir/yamlpipe/jinja"
)

// Beam YAML renders a pipeline file as a Jinja template before parsing it
// (apache_beam.yaml.main --jinja_variables), so one file can serve several
// environments and share pieces through {% include %} and {% import %}.
// Package jinja does the rendering; these wrappers give its errors the
// loader's Error type.

// HasJinja says whether src uses Jinja syntax ({{ }}, {% %} or {# #}).
func HasJinja(src []byte) bool { return jinja.Has(src) }

// RenderJinja renders the pipeline file src (named filename) with the
// Jinja variables vars, as Beam YAML does before parsing. Errors name the
// file and line.
func RenderJinja(filename string, src []byte, vars map[string]any) ([]byte, error) {
	out, err := jinja.Render(filename, src, vars)
	return out, jinjaError(err)
}

// RenderJinjaInline renders a pipeline template that came over the wire
// (the console's update preview) with vars. Such a template has no file
// beside it, and a server must not read the files a submitted template
// names, so {% include %}, {% import %} and {% from %} are refused at
// their position instead of expanded; everything else is RenderJinja's.
func RenderJinjaInline(filename string, src []byte, vars map[string]any) ([]byte, error) {
	out, err := jinja.RenderInline(filename, src, vars)
	return out, jinjaError(err)
}

// JinjaSandbox renders templates in a child process, within the render
// budgets' memory and time (package jinja's Sandbox): the weir binary
// serves it (see jinja.IsSandboxChild).
type JinjaSandbox = jinja.Sandbox

// IsJinjaSandboxChild says whether this process was started by a
// JinjaSandbox to render one template: a binary that serves sandboxed
// renders (weir's) checks it first thing and then returns
// ServeJinjaSandbox's exit code.
func IsJinjaSandboxChild() bool { return jinja.IsSandboxChild() }

// ServeJinjaSandbox renders the one template a JinjaSandbox sends on in,
// within its budgets, answers on out and returns the exit code.
func ServeJinjaSandbox(in io.Reader, out io.Writer) int { return jinja.ServeSandbox(in, out) }

// RenderJinjaWith renders the pipeline template src as RenderJinja does,
// or as RenderJinjaInline does when inline, in sandbox when it is not nil;
// relative include and import paths resolve from baseDir first (Beam's
// working directory), then from the including file's directory. A render
// past one of its budgets is an error matching ErrBudgetExceeded that
// names the budget and its value.
func RenderJinjaWith(ctx context.Context, filename string, src []byte, vars map[string]any, inline bool, sandbox *JinjaSandbox, baseDir string) ([]byte, error) {
	out, err := jinja.RenderWith(ctx, filename, src, jinja.Options{Vars: vars, Inline: inline, Sandbox: sandbox, BaseDir: baseDir})
	return out, jinjaError(err)
}

// ParseJinjaVariables reads --jinja_variables: a JSON object.
func ParseJinjaVariables(s string) (map[string]any, error) { return jinja.ParseVariables(s) }

// renderIfJinja renders src when it is a template or variables are given,
// in opts' sandbox when it has one.
func renderIfJinja(filename string, src []byte, opts Options) ([]byte, error) {
	out, err := jinja.RenderIf(context.Background(), filename, src, jinja.Options{Vars: opts.JinjaVariables, Sandbox: opts.JinjaSandbox, BaseDir: opts.BaseDir})
	return out, jinjaError(err)
}

// jinjaError turns a template error into the loader's Error.
func jinjaError(err error) error {
	var je *jinja.Error
	if err == nil || !errors.As(err, &je) {
		return err
	}
	return &Error{File: je.File, Line: je.Line, Col: je.Col, Msg: je.Msg, Err: je.Err}
}
