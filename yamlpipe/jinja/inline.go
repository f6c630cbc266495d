package jinja

import (
	"context"
	"fmt"
	"strings"
)

// RenderInline renders a pipeline template that came over the wire
// (the console's update preview) with vars. Such a template has no file
// beside it, and a server must not read the files a submitted template
// names, so {% include %}, {% import %} and {% from %} are refused at
// their position instead of expanded; everything else is Render's.
func RenderInline(filename string, src []byte, vars map[string]any) ([]byte, error) {
	return RenderWith(context.Background(), filename, src, Options{Vars: vars, Inline: true})
}

// refuseFiles refuses the first tag of text that reads another file.
func refuseFiles(filename, text string) error {
	for _, t := range blockTags(text) {
		if _, ok, _ := parseFileTag(t.body); ok {
			line := lineAt(text, t.start)
			col := 1 + t.start - (strings.LastIndex(text[:t.start], "\n") + 1)
			return &Error{File: filename, Line: line, Col: col,
				Msg: fmt.Sprintf("Jinja: %s reads another file, which a pipeline sent to the server cannot do; render the template where its files are (weir check / weir run --jinja-variables)", strings.TrimSpace(text[t.start:t.end]))}
		}
	}
	return nil
}
