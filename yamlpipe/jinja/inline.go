package jinja

import (
	"context"
	"fmt"
	"regexp"
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
	for _, re := range []*regexp.Regexp{jinjaInclude, jinjaImport, jinjaFrom} {
		if loc := re.FindStringIndex(text); loc != nil {
			line := lineAt(text, loc[0])
			col := 1 + loc[0] - (strings.LastIndex(text[:loc[0]], "\n") + 1)
			return &Error{File: filename, Line: line, Col: col,
				Msg: fmt.Sprintf("Jinja: %s reads another file, which a pipeline sent to the server cannot do; render the template where its files are (weir check / weir run --jinja-variables)", strings.TrimSpace(text[loc[0]:loc[1]]))}
		}
	}
	return nil
}
