package yamlpipe

import (
	"strings"
	"testing"
)

func TestRenderJinjaInline(t *testing.T) {
	for _, tc := range []struct {
		src, want, err string
	}{
		{src: "name: {{ n }}\n", want: "name: Totals\n"},
		{src: "a: 1\nb: {% include 'x.yaml' %}\n", err: "p.yaml:2:4: Jinja: {% include 'x.yaml' %} reads another file"},
		{src: "{% import \"m.yaml\" as m %}\n", err: "p.yaml:1:1: Jinja: {% import \"m.yaml\" as m %} reads another file"},
		{src: "x\n  {% from 'm' import a %}", err: "p.yaml:2:3: Jinja: {% from 'm' import a %}"},
	} {
		out, err := RenderJinjaInline("p.yaml", []byte(tc.src), map[string]any{"n": "Totals"})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.src, err, tc.err)
			}
			continue
		}
		if err != nil || string(out) != tc.want {
			t.Errorf("%q: rendered %q (%v), want %q", tc.src, out, err, tc.want)
		}
	}
}
