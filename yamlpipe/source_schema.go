package yamlpipe

import (
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/yamlpipe/srcschema"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// sourceSchema reads a source's schema in either form (weir's {field:
// type} or Beam's JSON Schema; see package srcschema) and returns it with
// the fields a JSON Schema requires (nil for weir's form).
func (l *loader) sourceSchema(n *yamlnode.Node) (*row.Schema, []string, error) {
	s, required, err := srcschema.Read(l.file, n)
	return s, required, positioned(err)
}
