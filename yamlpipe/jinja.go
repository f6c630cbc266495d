package yamlpipe

import (
	"errors"

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

// ParseJinjaVariables reads --jinja_variables: a JSON object.
func ParseJinjaVariables(s string) (map[string]any, error) { return jinja.ParseVariables(s) }

// renderIfJinja renders src when it is a template or variables are given.
func renderIfJinja(filename string, src []byte, vars map[string]any) ([]byte, error) {
	out, err := jinja.RenderIf(filename, src, vars)
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
