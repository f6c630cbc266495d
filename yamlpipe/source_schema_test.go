package yamlpipe

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weir-dev/weir/io/pubsub"
)

// beamJSONSchema is a source schema in Beam YAML's form: a JSON Schema of
// an object, with a nested object, an array, a map and a required field.
const beamJSONSchema = `
          type: object
          properties:
            id: {type: integer}
            name: {type: string, description: the name}
            tags: {type: array, items: {type: string}}
            owner:
              type: object
              properties:
                email: {type: string}
                age: {type: number}
            attrs: {type: object, additionalProperties: {type: integer}}
          required: [id]`

// beamJSONSchemaString is beamJSONSchema as the JSON text Beam's
// ReadFromPubSub also takes.
const beamJSONSchemaString = `'{"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "owner": {"type": "object", "properties": {"email": {"type": "string"}, "age": {"type": "number"}}},
            "attrs": {"type": "object", "additionalProperties": {"type": "integer"}}}, "required": ["id"]}'`

// TestSourceJSONSchema: a Beam user's ReadFromJson with a JSON Schema —
// as a mapping or as JSON text — reads the fields in their types (nested
// rows, lists, a map as a value of type any), and a line without a
// required field, or with it null, is a schema_mismatch reject on the
// error output, as a line of the wrong type is.
func TestSourceJSONSchema(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(strings.Join([]string{
		`{"id": 1, "name": "a", "tags": ["x", "y"], "owner": {"email": "a@x", "age": 30}, "attrs": {"k": 1}}`,
		`{"id": 2, "tags": []}`,
		`{"name": "no id"}`,
		`{"id": null, "name": "null id"}`,
		`{"id": "three"}`,
	}, "\n")+"\n"), 0o644))
	want := []string{
		`{"element": "{\"id\": \"three\"}", "error": {"step": "Read", "reason": "schema_mismatch", "message": "field id: want int, got string \"three\"", "window": null, "watermark": null}, "source": {"source": "DIR/in.jsonl", "offset": 5}}`,
		`{"element": "{\"id\": null, \"name\": \"null id\"}", "error": {"step": "Read", "reason": "schema_mismatch", "message": "field id is required by the schema but is missing or null", "window": null, "watermark": null}, "source": {"source": "DIR/in.jsonl", "offset": 4}}`,
		`{"element": "{\"name\": \"no id\"}", "error": {"step": "Read", "reason": "schema_mismatch", "message": "field id is required by the schema but is missing or null", "window": null, "watermark": null}, "source": {"source": "DIR/in.jsonl", "offset": 3}}`,
		`{"id": 1, "name": "a", "tags": ["x", "y"], "owner": {"email": "a@x", "age": 30.0}, "attrs": {"k": 1}}`,
		`{"id": 2, "name": null, "tags": [], "owner": null, "attrs": null}`,
	}
	for _, tc := range []struct{ name, schema string }{
		{"mapping", beamJSONSchema},
		{"JSON text", beamJSONSchemaString},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines, err := runCSVLogged(t, dir, `pipeline:
  transforms:
    - type: ReadFromJson
      name: Read
      config:
        path: in.jsonl
        schema: `+tc.schema+`
      error_handling: {output: bad}
    - {type: LogForTesting, input: Read}
    - {type: LogForTesting, name: LogBad, input: Read.bad}
`)
			if err != nil {
				t.Fatal(err)
			}
			for i := range lines {
				lines[i] = strings.ReplaceAll(lines[i], dir, "DIR")
			}
			wantLines(t, lines, want...)
		})
	}
}

// TestReadFromPubSubJSONSchema: ReadFromPubSub with format json takes
// Beam's JSON Schema and reads the same row schema as weir's own form
// gives, with the required fields handed to the source.
func TestReadFromPubSubJSONSchema(t *testing.T) {
	b := ordersBroker(t, t.TempDir())
	load := func(schema string) *pubsub.Source {
		t.Helper()
		src := "pipeline:\n  transforms:\n    - type: ReadFromPubSub\n      name: Orders\n      config:\n        topic: orders\n        format: JSON\n        schema: " + schema + "\n" +
			"    - type: LogForTesting\n      input: Orders\n"
		p, err := Load("f.yaml", []byte(src), Options{Job: &JobEnv{Name: "j", ID: "j-1", Generation: 1, Broker: b}, LogOutput: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		s, ok := p.Program().Code["Orders"].(*pubsub.Source)
		if !ok {
			t.Fatalf("step Orders is a %T, not a *pubsub.Source", p.Program().Code["Orders"])
		}
		return s
	}
	weirForm := load("{id: int, name: string, tags: [string], owner: {email: string, age: float}, attrs: any}").Config()
	for _, schema := range []string{beamJSONSchema, beamJSONSchemaString} {
		got := load(schema).Config()
		if !got.Schema.Equal(weirForm.Schema) {
			t.Errorf("schema %s\nreads %s, want %s", schema, got.Schema, weirForm.Schema)
		}
		if !slices.Equal(got.Required, []string{"id"}) {
			t.Errorf("required = %q, want [id]", got.Required)
		}
	}
	if weirForm.Required != nil {
		t.Errorf("weir's form requires %q, want nothing", weirForm.Required)
	}
}

// TestSourceJSONSchemaErrors: what a source's JSON Schema cannot honour is
// refused at its position, never ignored — a keyword that would constrain
// values further names ValidateWithSchema.
func TestSourceJSONSchemaErrors(t *testing.T) {
	const head = "pipeline:\n  transforms:\n    - type: ReadFromJson\n      config:\n        path: x.jsonl\n        schema:\n          type: object\n"
	for _, tc := range []struct {
		name, schema string
		line, col    int
		want         string
	}{
		{"no properties", "          required: [a]\n", 7, 11, "needs properties"},
		{"a value constraint", "          properties:\n            a: {type: integer, minimum: 0}\n", 9, 32, `keyword "minimum" is not checked by a source's schema`},
		{"a top-level constraint", "          properties: {a: {type: integer}}\n          maxProperties: 3\n", 9, 11, "check it with a ValidateWithSchema step"},
		{"required names an undeclared field", "          properties: {a: {type: integer}}\n          required: [a, b]\n", 9, 25, `required names "b"`},
		{"required in a nested object", "          properties:\n            o: {type: object, properties: {a: {type: string}}, required: [a]}\n", 9, 74, "checked at the schema's top level only"},
		{"additionalProperties false", "          properties: {a: {type: integer}}\n          additionalProperties: false\n", 9, 33, "additionalProperties is not checked"},
		{"an array without items", "          properties: {a: {type: array}}\n", 8, 27, "an array needs items"},
		{"a type list", "          properties: {a: {type: [integer, 'null']}}\n", 8, 34, "must be one JSON Schema type name"},
		{"an unknown type", "          properties: {a: {type: integer64}}\n", 8, 34, `unsupported JSON Schema type "integer64"`},
		{"a property without a type", "          properties: {a: {description: x}}\n", 8, 27, `property "a" has no type`},
		{"an object without properties", "          properties: {a: {type: object}}\n", 8, 27, "an object needs properties"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("f.yaml", []byte(head+tc.schema), Options{BaseDir: t.TempDir()})
			if err == nil {
				t.Fatal("loaded")
			}
			var e *Error
			if !errors.As(err, &e) || e.Line != tc.line || e.Col != tc.col || !strings.Contains(e.Msg, tc.want) {
				t.Errorf("err = %v, want %d:%d %q", err, tc.line, tc.col, tc.want)
			}
		})
	}
	// A string that is not JSON is refused at the string.
	_, err := Load("f.yaml", []byte("pipeline:\n  transforms:\n    - type: ReadFromJson\n      config: {path: x.jsonl, schema: '{\"type\": \"object\", '}\n"), Options{BaseDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "f.yaml:4:39: schema is a string but not a JSON object: ") {
		t.Errorf("a schema string that is not JSON: %v", err)
	}
}

// TestPubSubResourceNames: Beam's pipelines name topics and subscriptions
// by Google's resource names (projects/PROJECT/topics/NAME); a weir server
// is one project and reads NAME. Anything else is left for the source's
// own check of the name.
func TestPubSubResourceNames(t *testing.T) {
	for _, tc := range []struct{ in, kind, want string }{
		{"orders", "topics", "orders"},
		{"projects/p/topics/orders", "topics", "orders"},
		{"projects/my-project-1/subscriptions/orders-sub", "subscriptions", "orders-sub"},
		{"projects/p/subscriptions/s", "topics", "projects/p/subscriptions/s"},
		{"projects//topics/orders", "topics", "projects//topics/orders"},
		{"projects/a/b/topics/orders", "topics", "projects/a/b/topics/orders"},
		{"projects/p/topics/", "topics", "projects/p/topics/"},
	} {
		if got := resourceName(tc.in, tc.kind); got != tc.want {
			t.Errorf("resourceName(%q, %s) = %q, want %q", tc.in, tc.kind, got, tc.want)
		}
	}
	b := ordersBroker(t, t.TempDir())
	src := "pipeline:\n  transforms:\n    - type: ReadFromPubSub\n      name: Orders\n      config: {topic: projects/p/topics/orders, format: raw}\n" +
		"    - type: WriteToPubSub\n      input: Orders\n      config: {topic: projects/p/topics/copies}\n"
	p, err := Load("f.yaml", []byte(src), Options{Job: &JobEnv{Name: "j", ID: "j-1", Generation: 1, Broker: b}, LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Program().Code["Orders"].(*pubsub.Source).Config().Topic; got != "orders" {
		t.Errorf("ReadFromPubSub reads topic %q, want orders", got)
	}
}

// TestReadFromPubSubBeamOptions: Beam's format STRING and its attributes
// and attributes_map keys give the rows Beam gives — the payload's fields,
// then a string field per named attribute, then the map — and what would
// make two fields of one name, or a schema the format does not take, is
// refused at its position.
func TestReadFromPubSubBeamOptions(t *testing.T) {
	b := ordersBroker(t, t.TempDir())
	load := func(config string) (*pubsub.Source, error) {
		src := "pipeline:\n  transforms:\n    - type: ReadFromPubSub\n      name: Orders\n      config: {topic: orders, " + config + "}\n" +
			"    - type: LogForTesting\n      input: Orders\n"
		p, err := Load("f.yaml", []byte(src), Options{Job: &JobEnv{Name: "j", ID: "j-1", Generation: 1, Broker: b}, LogOutput: io.Discard})
		if err != nil {
			return nil, err
		}
		return p.Program().Code["Orders"].(*pubsub.Source), nil
	}
	for _, tc := range []struct{ config, schema, err string }{
		{"format: STRING", "{payload:string}", ""},
		{"format: STRING, attributes: [origin, lang], attributes_map: attrs", "{payload:string,origin:string,lang:string,attrs:any}", ""},
		{"format: JSON, schema: {k: string}, attributes_map: attrs", "{k:string,attrs:any}", ""},
		{"format: RAW, attributes: [origin]", "{data:string,attributes:any,id:string,publish_time:timestamp,origin:string}", ""},
		{"format: JSON, schema: {k: string}, attributes: [k]", "", `f.yaml:5:79: ReadFromPubSub: the attribute field "k" is already a field of the rows`},
		{"format: STRING, attributes: [a], attributes_map: a", "", `the attribute field "a" is already a field of the rows`},
		{"format: STRING, attributes: origin", "", "f.yaml:5:59: ReadFromPubSub attributes must be a list of attribute names"},
		{"format: STRING, schema: {k: string}", "", "f.yaml:5:55: ReadFromPubSub with format string takes no schema: its rows are {payload:string}"},
	} {
		s, err := load(tc.config)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err = %v, want %q", tc.config, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.config, err)
			continue
		}
		if got := s.Config().Schema.String(); got != tc.schema {
			t.Errorf("%s: rows %s, want %s", tc.config, got, tc.schema)
		}
	}
	// WriteToPubSub: Beam's attributes (a list of fields) and
	// attributes_map leave the payload's fields; weir's map of constant
	// attributes stays.
	for _, tc := range []struct{ config, err string }{
		{"format: string, attributes: [origin], attributes_map: attrs", ""},
		{"attributes: [origin]", ""},
		{"attributes: {team: data}", ""},
		{"format: string, attributes: [origin]", "needs rows of one string field besides the attribute fields"},
		{"attributes: [colour]", `f.yaml:8:44: WriteToPubSub attribute field "colour" is not a field of the input`},
		{"attributes: [origin], attributes_map: origin", `WriteToPubSub attributes_map field "origin" is not a field of the input ({payload:string,origin:string,attrs:any}), or is named twice`},
	} {
		src := "pipeline:\n  transforms:\n    - type: ReadFromPubSub\n      name: Orders\n      config: {topic: orders, format: string, attributes: [origin], attributes_map: attrs}\n" +
			"    - type: WriteToPubSub\n      input: Orders\n      config: {topic: copies, " + tc.config + "}\n"
		_, err := Load("f.yaml", []byte(src), Options{Job: &JobEnv{Name: "j", ID: "j-1", Generation: 1, Broker: b}, LogOutput: io.Discard})
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("WriteToPubSub %s: err = %v, want %q", tc.config, err, tc.err)
		}
	}
}
