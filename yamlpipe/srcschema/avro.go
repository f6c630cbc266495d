package srcschema

import (
	"encoding/json"

	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// AvroText returns an Avro schema written in a pipeline as JSON text: n's
// own text when it is a string (Beam's configs take the schema as a JSON
// string), else n as JSON (a schema written as a YAML mapping). It does
// not read the schema: its reader (io/avrorow) does, and says what is
// wrong at n.
func AvroText(file string, n *yamlnode.Node) (string, error) {
	switch n.Kind {
	case yamlnode.String:
		return n.Text, nil
	case yamlnode.Map:
		b, err := json.Marshal(n.Plain())
		if err != nil {
			return "", reader{file}.errf(n, "schema: %v", err)
		}
		return string(b), nil
	}
	return "", reader{file}.errf(n, "an Avro schema must be a mapping ({type: record, name: ..., fields: [...]}) or its JSON text, not %s", n.Kind)
}
