package yamlpipe

import (
	"fmt"
	"strings"
	"testing"
)

// The inputs of Beam's join tests (sdks/python/apache_beam/yaml/tests/join.yaml).
const joinInputs = `pipeline:
  transforms:
    - type: Create
      name: A
      config:
        elements:
          - {common: "x", a: 1}
          - {common: "y", a: 2}
          - {common: "z", a: 3}
    - type: Create
      name: B
      config:
        elements:
          - {common: "x", b: 10}
          - {common: "y", b: 20}
          - {common: "z", b: 30}
    - type: Create
      name: C
      config:
        elements:
          - {common: "x", c: 100}
          - {common: "y", c: 200}
`

// Beam's own Join tests give Beam's rows.
func TestJoinBeamTests(t *testing.T) {
	tests := []struct {
		name, step string
		want       []string
	}{
		{"inner", `    - type: Join
      input: {A: A, B: B, C: C}
      config:
        type: inner
        equalities:
          - {A: common, B: common, C: common}
        fields:
          A: [common, a]
          B: [b]
          C: {c: c, common_c: common}
`, []string{`{"common": "x", "a": 1, "b": 10, "c": 100, "common_c": "x"}`, `{"common": "y", "a": 2, "b": 20, "c": 200, "common_c": "y"}`}},
		{"outer", `    - type: Join
      input: {A: A, B: B, C: C}
      config:
        type: outer
        equalities:
          - {A: common, B: common, C: common}
        fields:
          A: [common, a]
          B: [b]
          C: {c: c, common_c: common}
`, []string{`{"common": "x", "a": 1, "b": 10, "c": 100, "common_c": "x"}`, `{"common": "y", "a": 2, "b": 20, "c": 200, "common_c": "y"}`,
			`{"common": "z", "a": 3, "b": 30, "c": null, "common_c": null}`}},
		{"left", `    - type: Join
      input: {A: A, C: C}
      config:
        type: left
        equalities: [{A: common, C: common}]
        fields: {A: [a], C: [c]}
`, []string{`{"a": 1, "c": 100}`, `{"a": 2, "c": 200}`, `{"a": 3, "c": null}`}},
		{"right", `    - type: Join
      input: {A: A, C: C}
      config:
        type: right
        equalities: [{A: common, C: common}]
        fields: {A: [a], C: [c]}
`, []string{`{"a": 1, "c": 100}`, `{"a": 2, "c": 200}`}},
		{"right keeps unmatched right rows", `    - type: Join
      input: {C: C, A: A}
      config:
        type: right
        equalities: common
        fields: {A: [a], C: [c]}
`, []string{`{"a": 1, "c": 100}`, `{"a": 2, "c": 200}`, `{"a": 3, "c": null}`}},
		{"shorthand, all fields", `    - type: Join
      input: {A: A, C: C}
      config:
        equalities: common
`, []string{`{"common": "x", "a": 1, "common0": "x", "c": 100}`, `{"common": "y", "a": 2, "common0": "y", "c": 200}`}},
		{"outer by input", `    - type: Join
      input: {A: A, C: C}
      config:
        type: {outer: [A]}
        equalities: common
        fields: {A: [a], C: [c]}
`, []string{`{"a": 1, "c": 100}`, `{"a": 2, "c": 200}`, `{"a": 3, "c": null}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lines, _ := runLogged(t, joinInputs+tc.step+"    - type: LogForTesting\n      input: Join\n", 2)
			wantLines(t, lines, tc.want...)
		})
	}
}

// joinInput is a Create step of the join tests: its name and its
// elements (YAML flow maps).
type joinInput struct {
	name     string
	elements []string
}

// windowedJoinYAML is a pipeline that creates inputs, stamps the rows of
// each with their field t (in step T followed by the input's initial),
// joins the stamped inputs named by input (a YAML flow map) in fixed 60s
// windows with config (the lines of the Join's config block) and logs the
// joined rows.
func windowedJoinYAML(inputs []joinInput, input, config string) string {
	var b strings.Builder
	b.WriteString("pipeline:\n  transforms:\n")
	for _, in := range inputs {
		fmt.Fprintf(&b, "    - type: Create\n      name: %s\n      config:\n        elements:\n", in.name)
		for _, e := range in.elements {
			fmt.Fprintf(&b, "          - %s\n", e)
		}
	}
	for _, in := range inputs {
		fmt.Fprintf(&b, "    - type: AssignTimestamps\n      name: T%s\n      input: %s\n      config: {timestamp: t}\n", in.name[:1], in.name)
	}
	fmt.Fprintf(&b, "    - type: Join\n      input: %s\n      windowing: {type: fixed, size: 60s}\n      config:\n%s", input, config)
	b.WriteString("    - type: LogForTesting\n      input: Join\n")
	return b.String()
}

// Rows join within windows, as in Beam: the same key in different windows
// does not meet.
func TestJoinWithinWindows(t *testing.T) {
	src := windowedJoinYAML([]joinInput{
		{"Clicks", []string{"{user: u1, t: 10, page: home}", "{user: u1, t: 70, page: cart}"}},
		{"Buys", []string{"{user: u1, t: 20, item: book}", "{user: u1, t: 130, item: pen}"}},
	}, "{c: TC, b: TB}", `        type: outer
        equalities: user
        fields: {c: [page], b: [item]}
`)
	lines, _ := runLogged(t, src, 2)
	wantLines(t, lines, `{"page": "home", "item": "book"}`, `{"page": "cart", "item": null}`, `{"page": null, "item": "pen"}`)
}

func TestJoinErrors(t *testing.T) {
	at := joinInputs + "    - type: Join\n"
	loadErr(t, at+"      input: [A, B]\n      config: {equalities: common}\n", "Join needs at least 2 named inputs")
	loadErr(t, at+"      input: {A: A, B: B}\n      config: {equalities: nope}\n", `"nope" is not a field of input A`)
	loadErr(t, at+"      input: {A: A, B: B}\n      config: {equalities: common, type: sideways}\n", `Join type "sideways" is not one of`)
	loadErr(t, at+"      input: {A: A, B: B, C: C}\n      config: {equalities: [{A: common, B: common}]}\n", "equalities do not link input(s) C to A")
	loadErr(t, at+"      input: {A: A, B: B, C: C}\n      config: {equalities: [{A: common, B: common}, {B: b, C: common}]}\n", "B.b is int but C.common is string")
	loadErr(t, at+"      input: {A: A, B: B}\n      config: {equalities: [{A: common, X: common}]}\n", `"X" is not an input of the Join`)
	loadErr(t, at+"      input: {A: A, B: B}\n      config: {equalities: [{A: a, B: common}]}\n", "A.a is int but B.common is string")
	loadErr(t, at+"      input: {A: A, B: B}\n      config: {equalities: common, fields: {A: [a], B: {a: b}}}\n", `"a" is given more than once`)
}

// The inputs of the joins on different keys per pair of inputs.
const joinPairInputs = `pipeline:
  transforms:
    - type: Create
      name: Users
      config:
        elements:
          - {uid: 1, name: ann, city: 10}
          - {uid: 2, name: bob, city: 20}
          - {uid: 3, name: cy, city: 99}
    - type: Create
      name: Orders
      config:
        elements:
          - {oid: 100, user: 1, item: book}
          - {oid: 101, user: 1, item: pen}
          - {oid: 102, user: 4, item: cup}
    - type: Create
      name: Cities
      config:
        elements:
          - {id: 10, cname: paris}
          - {id: 20, cname: rome}
          - {id: 30, cname: oslo}
`

// Beam's equalities may join each pair of inputs on its own fields:
// U JOIN O ON U.uid = O.user JOIN C ON U.city = C.id, for every join type.
func TestJoinDifferentKeysPerPair(t *testing.T) {
	step := func(input, typ string) string {
		return `    - type: Join
      input: ` + input + `
      config:
        type: ` + typ + `
        equalities:
          - {U: uid, O: user}
          - {U: city, C: id}
        fields: {U: [name], O: [item], C: [cname]}
    - type: LogForTesting
      input: Join
`
	}
	const uoc = "{U: Users, O: Orders, C: Cities}"
	tests := []struct {
		name, input, typ string
		want             []string
	}{
		{"inner", uoc, "inner", []string{`{"name": "ann", "item": "book", "cname": "paris"}`, `{"name": "ann", "item": "pen", "cname": "paris"}`}},
		{"left", uoc, "left", []string{`{"name": "ann", "item": "book", "cname": "paris"}`, `{"name": "ann", "item": "pen", "cname": "paris"}`,
			`{"name": "bob", "item": null, "cname": "rome"}`, `{"name": "cy", "item": null, "cname": null}`}},
		{"right", uoc, "right", []string{`{"name": "ann", "item": "book", "cname": "paris"}`, `{"name": "ann", "item": "pen", "cname": "paris"}`,
			`{"name": null, "item": null, "cname": "rome"}`, `{"name": null, "item": null, "cname": "oslo"}`}},
		{"outer", uoc, "outer", []string{`{"name": "ann", "item": "book", "cname": "paris"}`, `{"name": "ann", "item": "pen", "cname": "paris"}`,
			`{"name": "bob", "item": null, "cname": "rome"}`, `{"name": "cy", "item": null, "cname": null}`,
			`{"name": null, "item": "cup", "cname": null}`, `{"name": null, "item": null, "cname": "oslo"}`}},
		{"outer by input", uoc, "{outer: [O]}", []string{`{"name": "ann", "item": "book", "cname": "paris"}`, `{"name": "ann", "item": "pen", "cname": "paris"}`,
			`{"name": null, "item": "cup", "cname": null}`}},
		// C is linked to U only, so it is joined after U.
		{"inputs in another order", "{O: Orders, C: Cities, U: Users}", "inner", []string{`{"name": "ann", "item": "book", "cname": "paris"}`, `{"name": "ann", "item": "pen", "cname": "paris"}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lines, _ := runLogged(t, joinPairInputs+step(tc.input, tc.typ), 2)
			wantLines(t, lines, tc.want...)
		})
	}
}

// A join on different keys per pair happens within windows too.
func TestJoinDifferentKeysWithinWindows(t *testing.T) {
	src := windowedJoinYAML([]joinInput{
		{"Clicks", []string{"{user: u1, t: 10, page: home}", "{user: u1, t: 70, page: cart}"}},
		{"Buys", []string{"{buyer: u1, t: 20, item: book}", "{buyer: u1, t: 80, item: pen}"}},
	}, "{c: TC, b: TB}", `        equalities: [{c: user, b: buyer}]
        fields: {c: [page], b: [item]}
`)
	lines, _ := runLogged(t, src, 2)
	wantLines(t, lines, `{"page": "home", "item": "book"}`, `{"page": "cart", "item": "pen"}`)
}

// Three inputs joined on different keys per pair, in fixed windows: rows
// meet only within their window.
func TestJoinDifferentKeysPerPairWithinWindows(t *testing.T) {
	src := windowedJoinYAML([]joinInput{
		{"Users", []string{"{uid: 1, name: ann, city: 10, t: 5}", "{uid: 1, name: ann, city: 20, t: 65}"}},
		{"Orders", []string{"{user: 1, item: book, t: 10}", "{user: 1, item: pen, t: 70}"}},
		{"Cities", []string{"{id: 10, cname: paris, t: 1}", "{id: 20, cname: rome, t: 2}"}},
	}, "{U: TU, O: TO, C: TC}", `        type: left
        equalities:
          - {U: uid, O: user}
          - {U: city, C: id}
        fields: {U: [name], O: [item], C: [cname]}
`)
	lines, _ := runLogged(t, src, 2)
	// rome is in the first window, the second user row in the second.
	wantLines(t, lines, `{"name": "ann", "item": "book", "cname": "paris"}`, `{"name": "ann", "item": "pen", "cname": null}`)
}
