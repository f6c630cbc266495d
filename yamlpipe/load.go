// Package yamlpipe is weir's YAML front door: it reads Beam-YAML-style
// pipeline files (`pipeline: transforms: [{type, name, input, config,
// windowing, error_handling}]`, expressions in CEL), validates them with
// errors that name file:line:column, and compiles them into an SDK pipeline
// of schema'd rows (package row) whose steps carry their YAML config.
//
// Expressions are compiled and evaluated by yamlpipe/celexpr (CEL) and
// yamlpipe/python (language: python); templates are rendered by
// yamlpipe/jinja. The text is checked by yamlpipe/yamlscan and parsed into
// yamlpipe/yamlnode's positioned tree; transforms' run times live in
// yamlpipe/combine, join, sqlquery, keyenc, textio, nexmarkrow, schemacheck,
// logfortesting, wininfo and assertcheck, schema inference in schemainfer.
//
// It may import weir (the SDK root package), graph, window, mtime,
// runner/contract, row, io/files, manifest (the input manifests file
// sources read), io/iceberg, io/jdbc, io/pubsub, io/sqlsink, nexmark (the
// Nexmark source), yamlpipe/celexpr, yamlpipe/python, yamlpipe/jinja,
// yamlpipe/yamlscan, yamlpipe/yamlnode, yamlpipe/combine, yamlpipe/join, yamlpipe/keyenc,
// yamlpipe/sqlquery, yamlpipe/textio, yamlpipe/pyrepr (WriteToText's
// lines), yamlpipe/genrows (Generate's rows), yamlpipe/nexmarkrow,
// yamlpipe/schemacheck, yamlpipe/schemainfer, yamlpipe/srcschema (sources' schemas in
// Beam's forms), yamlpipe/logfortesting,
// yamlpipe/wininfo, yamlpipe/assertcheck, cel.dev/cel-go,
// github.com/goccy/go-yaml and the standard library; it reaches the
// executor (package runner) only through the SDK's Run. Nothing but front
// ends (the CLI, the job service) imports it, and it must not import
// service, api, server or cmd/weir.
package yamlpipe

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/yamlpipe/logfortesting"
	"github.com/weir-dev/weir/yamlpipe/yamlnode"
)

// LoadFile reads, validates and compiles a pipeline file into an SDK
// pipeline, rendering it first when it is a Jinja template (see
// Options.RenderJinja). Every error names file:line:column and the problem.
func LoadFile(path string, opts Options) (*weir.Pipeline, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the pipeline file: %w", err)
	}
	opts.RenderJinja = true
	return Load(path, src, opts)
}

// Load validates and compiles the pipeline in src; filename is used in
// error messages and element source positions.
func Load(filename string, src []byte, opts Options) (*weir.Pipeline, error) {
	l := &loader{file: filename, opts: opts, outs: map[string]*coll{}}
	if opts.RenderJinja {
		var err error
		if src, err = renderIfJinja(filename, src, opts); err != nil {
			return nil, err
		}
	}
	root, err := parseYAML(filename, src)
	if err != nil {
		return nil, err
	}
	if err := l.parse(root); err != nil {
		return nil, err
	}
	if err := l.build(); err != nil {
		return nil, err
	}
	if err := l.p.Err(); err != nil {
		return nil, l.wrapf(root, err, "building the pipeline")
	}
	if err := l.p.Graph().Validate(); err != nil {
		return nil, l.wrapf(root, err, "validating the pipeline graph")
	}
	l.setRewindHorizon()
	return l.p, nil
}

// transformSpec is one entry of pipeline.transforms.
type transformSpec struct {
	n         *yamlnode.Node
	typ       string
	typNode   *yamlnode.Node
	name      string
	nameNode  *yamlnode.Node // nil when the name defaults to the type
	inputs    []inputRef
	inputNode *yamlnode.Node
	config    *yamlnode.Node
	windowing *yamlnode.Node
	errOut    string
	errNode   *yamlnode.Node
	def       *transformDef
	// sides are the side_inputs of the config, resolved like inputs.
	sides []sideRef
	// hints are the transform's resource_hints merged over its composites'
	// and the pipeline's (advisory: recorded in the step's config).
	hints map[string]any
	// migrations is a Combine's migrations: (migrate.go); nil without.
	migrations *yamlnode.Node
}

type inputRef struct {
	text string
	n    *yamlnode.Node
	from *transformSpec
	tag  string // "" for the main output
	// implicit marks a chain's reference to the previous transform (never
	// ambiguous: it is that transform).
	implicit bool
}

type sideRef struct {
	name string
	inputRef
}

// loader holds the state of one Load call.
type loader struct {
	file string
	opts Options
	// manifestDigest is the digest of the first manifest a file source
	// read (a partition run's publication log records it).
	manifestDigest string
	specs          []*transformSpec
	byName         map[string]*transformSpec
	// ambiguous maps a type to its unnamed transforms when there are
	// several (the first is named TYPE, the others TYPE@LINE).
	ambiguous map[string][]*transformSpec
	p         *weir.Pipeline
	root      weir.Scope
	// outs maps "Name" and "Name.tag" to built collections.
	outs map[string]*coll
	// pubsubSources are the ReadFromPubSub sources built, whose rewind
	// horizon is set once the graph is known (setRewindHorizon).
	pubsubSources []*pubsub.Source
	// log is where the LogForTesting steps print (see logOutput).
	log *logfortesting.Lines
	// alias maps a nested composite's name (and Name.output) to the
	// transform producing its output (see expandComposite).
	alias map[string]string
	// composites are the top-level composites, for name checks.
	composites []compositeAt
}

func (l *loader) parse(root *yamlnode.Node) error {
	if root.Kind != yamlnode.Map {
		return l.errf(root, "a pipeline file must be a mapping with a pipeline key, not %s", root.Kind)
	}
	if err := l.refuseProviders(root); err != nil {
		return err
	}
	// tests: Beam YAML's test cases of the pipeline, run by `weir test`
	// (package sandbox); loading the pipeline ignores them.
	if err := l.checkKeys(root, "the pipeline file", "pipeline", "options", "tests", "migrations"); err != nil {
		return err
	}
	pl := root.Get("pipeline")
	if pl == nil {
		return l.errf(root, "the file has no pipeline key")
	}
	if pl.Kind == yamlnode.Seq {
		pl = &yamlnode.Node{Kind: yamlnode.Map, Line: pl.Line, Col: pl.Col, Keys: []*yamlnode.Node{{Kind: yamlnode.String, Text: "transforms", Line: pl.Line, Col: pl.Col}}, Vals: []*yamlnode.Node{pl}}
	}
	if err := l.checkKeys(pl, "pipeline", "type", "transforms", "source", "sink", "resource_hints"); err != nil {
		return err
	}
	pipelineHints, err := l.readHints(pl.Get("resource_hints"))
	if err != nil {
		return err
	}
	ptype, err := l.str(pl.Get("type"), "pipeline type")
	if err != nil {
		return err
	}
	chain := false
	switch ptype {
	case "", "composite":
	case "chain":
		chain = true
	default:
		return l.errf(pl.Get("type"), "unknown pipeline type %q (want chain or composite)", ptype)
	}
	if !chain && (pl.Get("source") != nil || pl.Get("sink") != nil) {
		n := pl.KeyNode("source")
		if n == nil {
			n = pl.KeyNode("sink")
		}
		return l.errf(n, "source and sink are only allowed in a pipeline of type chain")
	}
	tn := pl.Get("transforms")
	if tn == nil || tn.Kind != yamlnode.Seq {
		if tn == nil {
			return l.errf(pl, "pipeline needs a transforms list")
		}
		return l.errf(tn, "pipeline transforms must be a list, not %s", tn.Kind)
	}
	items := append([]*yamlnode.Node(nil), tn.Seq...)
	if chain {
		if s := pl.Get("source"); s != nil {
			items = append([]*yamlnode.Node{s}, items...)
		}
		if s := pl.Get("sink"); s != nil {
			items = append(items, s)
		}
	}
	if len(items) == 0 {
		return l.errf(tn, "pipeline transforms is empty")
	}
	l.alias = map[string]string{}
	for _, it := range items {
		if isComposite(it) {
			if chain {
				return l.errf(it, "a nested %s cannot be a step of a chain: use a composite pipeline", it.Get("type").Text)
			}
			inner, err := l.expandComposite(it, "", nil)
			if err != nil {
				return err
			}
			l.specs = append(l.specs, inner...)
			continue
		}
		t, err := l.parseTransform(it, chain)
		if err != nil {
			return err
		}
		l.specs = append(l.specs, t)
	}
	for _, t := range l.specs {
		t.hints = mergeHints(pipelineHints, t.hints)
	}
	if err := l.attachMigrations(root.Get("migrations")); err != nil {
		return err
	}
	if err := l.assignNames(); err != nil {
		return err
	}
	if err := l.checkCompositeNames(); err != nil {
		return err
	}
	if chain {
		for i, t := range l.specs {
			if t.def.source {
				if i > 0 {
					return l.errf(t.typNode, "%s is a source: in a chain it can only come first", t.typ)
				}
				continue
			}
			if i == 0 {
				return l.errf(t.typNode, "a chain must start with a source (Create, TestStream, Generate, ReadFromJson, ReadFromCsv), not %s", t.typ)
			}
			t.inputs = []inputRef{{text: l.specs[i-1].name, n: t.typNode, implicit: true}}
		}
	}
	if err := l.resolve(); err != nil {
		return err
	}
	return l.applyTestTaps()
}

func (l *loader) parseTransform(n *yamlnode.Node, chain bool) (*transformSpec, error) {
	if n.Kind != yamlnode.Map {
		return nil, l.errf(n, "a transform must be a mapping with a type, not %s", n.Kind)
	}
	if err := l.checkKeys(n, "a transform", "type", "name", "input", "config", "windowing", "error_handling", "resource_hints", "migrations"); err != nil {
		return nil, err
	}
	t := &transformSpec{n: n}
	var err error
	if t.hints, err = l.readHints(n.Get("resource_hints")); err != nil {
		return nil, err
	}
	if t.typ, t.typNode, err = l.requireStr(n, "type", "a transform"); err != nil {
		return nil, err
	}
	def, ok := lookupTransform(t.typ)
	if !ok {
		return nil, l.errf(t.typNode, "unknown transform type %q (known: %s)", t.typ, strings.Join(transformTypes(), ", "))
	}
	t.def = def
	if nn := n.Get("name"); nn != nil {
		if t.name, err = l.str(nn, "transform name"); err != nil {
			return nil, err
		}
		if err := graph.ValidateName(t.name); err != nil {
			return nil, l.wrapf(nn, err, "bad transform name")
		}
		if strings.Contains(t.name, "/") {
			return nil, l.errf(nn, "transform name %q must not contain '/' (it separates the steps of a composite)", t.name)
		}
		t.nameNode = nn
	}
	if mn := n.Get("migrations"); mn != nil {
		if t.typ != "Combine" {
			return nil, l.errf(n.KeyNode("migrations"), "migrations: only a Combine declares state migrations (%s keeps no accumulators)", t.typ)
		}
		t.migrations = mn
	}
	t.config = n.Get("config")
	if t.config != nil && t.config.Kind == yamlnode.Null {
		t.config = nil
	}
	if t.config != nil && t.config.Kind != yamlnode.Map {
		return nil, l.errf(t.config, "config must be a mapping, not %s", t.config.Kind)
	}
	if err := l.checkKeys(t.config, t.typ+" config", def.keys...); err != nil {
		return nil, err
	}
	t.windowing = n.Get("windowing")
	if t.windowing != nil && def.sink {
		return nil, l.errf(n.KeyNode("windowing"), "%s is a sink: windowing has no effect on it", t.typ)
	}
	// error_handling, at the transform level or (as in Beam YAML) in config.
	eh := n.Get("error_handling")
	if ceh := t.config.Get("error_handling"); ceh != nil {
		if eh != nil {
			return nil, l.errf(ceh, "error_handling is given twice (in the transform and in its config)")
		}
		eh = ceh
	}
	if osh := t.config.Get("output_schema"); osh != nil && t.typ == "Create" {
		// Beam's Create declares its error output inside output_schema.
		if oeh := osh.Get("error_handling"); oeh != nil {
			if eh != nil {
				return nil, l.errf(oeh, "error_handling is given twice (in output_schema and in the transform or its config)")
			}
			eh = oeh
		}
	}
	if eh != nil {
		if !def.errors {
			return nil, l.errf(eh, "%s does not produce rejects: it takes no error_handling", t.typ)
		}
		if err := l.checkKeys(eh, "error_handling", "output"); err != nil {
			return nil, err
		}
		out, on, err := l.requireStr(eh, "output", "error_handling")
		if err != nil {
			return nil, err
		}
		if out == graph.MainTag || strings.ContainsAny(out, "./ ") {
			return nil, l.errf(on, "error output name %q is not allowed (use letters, digits, _ and -, not %q)", out, graph.MainTag)
		}
		t.errOut, t.errNode = out, on
	}
	if in := n.Get("input"); in != nil {
		if chain {
			return nil, l.errf(n.KeyNode("input"), "transforms of a chain read the previous transform: remove input")
		}
		if def.source {
			return nil, l.errf(n.KeyNode("input"), "%s is a source: it takes no input", t.typ)
		}
		t.inputNode = in
		switch in.Kind {
		case yamlnode.Map:
			for i := range in.Vals {
				s, err := l.str(in.Vals[i], "input")
				if err != nil {
					return nil, err
				}
				t.inputs = append(t.inputs, inputRef{text: s, n: in.Vals[i]})
			}
		default:
			strs, nodes, err := l.strList(in, "input")
			if err != nil {
				return nil, err
			}
			for i, s := range strs {
				t.inputs = append(t.inputs, inputRef{text: s, n: nodes[i]})
			}
		}
	}
	if !chain && !def.source && len(t.inputs) == 0 {
		return nil, l.errf(t.typNode, "%s needs an input (input: NAME)", t.typ)
	}
	if !chain && len(t.inputs) > 1 && !def.multi {
		return nil, l.errf(t.inputNode, "%s takes one input, got %d (use Flatten to merge collections)", t.typ, len(t.inputs))
	}
	if si := t.config.Get("side_inputs"); si != nil {
		if si.Kind != yamlnode.Map {
			return nil, l.errf(si, "side_inputs must map names to transforms, not %s", si.Kind)
		}
		for i, k := range si.Keys {
			s, err := l.str(si.Vals[i], "side input")
			if err != nil {
				return nil, err
			}
			t.sides = append(t.sides, sideRef{name: k.Text, inputRef: inputRef{text: s, n: si.Vals[i]}})
		}
	}
	return t, nil
}

// assignNames gives unnamed transforms their type as name and checks that
// names are unique. As in Beam, a later unnamed transform of a type already
// used is named TYPE@LINE (its line in the file); referring to the bare
// type is then ambiguous (resolveRef says so).
func (l *loader) assignNames() error {
	unnamed := map[string][]*transformSpec{}
	sinks := map[string]int{}
	for _, t := range l.specs {
		if t.nameNode != nil {
			continue
		}
		if def, ok := lookupTransform(t.typ); ok && def.sink {
			// As in Beam, unnamed sinks of one type may repeat: nothing can
			// refer to a sink, so the name is never ambiguous. The second is
			// "AssertEqual 2", and so on, in the file's order.
			sinks[t.typ]++
			t.name = t.typ
			if n := sinks[t.typ]; n > 1 {
				t.name = fmt.Sprintf("%s %d", t.typ, n)
			}
			continue
		}
		t.name = t.typ
		if len(unnamed[t.typ]) > 0 {
			t.name = fmt.Sprintf("%s@%d", t.typ, t.n.Line)
		}
		unnamed[t.typ] = append(unnamed[t.typ], t)
	}
	l.ambiguous = map[string][]*transformSpec{}
	for typ, ts := range unnamed {
		if len(ts) > 1 {
			l.ambiguous[typ] = ts
		}
	}
	l.byName = map[string]*transformSpec{}
	for _, t := range l.specs {
		if prev, dup := l.byName[t.name]; dup {
			at := t.nameNode
			if at == nil {
				at = t.n
			}
			return l.errf(at, "duplicate transform name %q (also at line %d): names must be unique", t.name, prev.n.Line)
		}
		l.byName[t.name] = t
	}
	return nil
}

// resolveRef finds the transform and output tag an input reference names.
func (l *loader) resolveRef(r *inputRef) error {
	r.text = l.unalias(r.text)
	if ts := l.ambiguous[strings.SplitN(r.text, ".", 2)[0]]; len(ts) > 1 && !r.implicit {
		var at []string
		for _, t := range ts {
			at = append(at, fmt.Sprintf("%s (line %d)", t.name, t.n.Line))
		}
		return l.errf(r.n, "input %q is ambiguous: %d unnamed %s transforms (%s); give them names, or read one by its automatic name", r.text, len(ts), ts[0].typ, strings.Join(at, ", "))
	}
	if t, ok := l.byName[r.text]; ok {
		r.from, r.tag = t, ""
	} else if i := strings.LastIndexByte(r.text, '.'); i > 0 {
		if t, ok := l.byName[r.text[:i]]; ok {
			r.from, r.tag = t, r.text[i+1:]
		}
	}
	if r.from == nil {
		return l.errf(r.n, "unknown input %q (transforms: %s)", r.text, strings.Join(l.names(), ", "))
	}
	tags := l.outputTags(r.from)
	if r.tag == "" && len(tags) > 0 {
		return l.errf(r.n, "input %q: %s has no main output; read one of its outputs (%s) as %s.NAME", r.text, r.from.typ, strings.Join(tags, ", "), r.from.name)
	}
	if r.tag != "" && r.tag != r.from.errOut && !slices.Contains(tags, r.tag) {
		if len(tags) > 0 {
			return l.errf(r.n, "input %q: transform %q has no output %q (its outputs: %s)", r.text, r.from.name, r.tag, strings.Join(tags, ", "))
		}
		if r.from.errOut == "" {
			return l.errf(r.n, "input %q: transform %q has no output %q (declare error_handling: {output: %s} on it)", r.text, r.from.name, r.tag, r.tag)
		}
		return l.errf(r.n, "input %q: transform %q has no output %q (its error output is %q)", r.text, r.from.name, r.tag, r.from.errOut)
	}
	if r.tag == "" && r.from.def.sink {
		return l.errf(r.n, "input %q: %s is a sink and has no output", r.text, r.from.typ)
	}
	return nil
}

func (l *loader) names() []string {
	out := make([]string, 0, len(l.specs))
	for _, t := range l.specs {
		out = append(out, t.name)
	}
	sort.Strings(out)
	return out
}

// resolve binds inputs and side inputs and checks that every declared error
// output is consumed.
func (l *loader) resolve() error {
	consumed := map[*transformSpec]bool{}
	for _, t := range l.specs {
		for i := range t.inputs {
			if err := l.resolveRef(&t.inputs[i]); err != nil {
				return err
			}
			if t.inputs[i].tag != "" {
				consumed[t.inputs[i].from] = true
			}
		}
		for i := range t.sides {
			if err := l.resolveRef(&t.sides[i].inputRef); err != nil {
				return err
			}
			if t.sides[i].tag != "" {
				consumed[t.sides[i].from] = true
			}
		}
	}
	for _, t := range l.specs {
		if t.errOut != "" && !consumed[t] {
			return l.errf(t.errNode, "error output %q of %q is not consumed: read it with input: %s.%s (e.g. in a WriteToJson), as Beam YAML requires", t.errOut, t.name, t.name, t.errOut)
		}
	}
	return nil
}

// order returns the transforms with producers first.
func (l *loader) order() ([]*transformSpec, error) {
	state := map[*transformSpec]int{}
	var out []*transformSpec
	var visit func(t *transformSpec, via *yamlnode.Node) error
	visit = func(t *transformSpec, via *yamlnode.Node) error {
		switch state[t] {
		case 1:
			return l.errf(via, "the pipeline has a cycle through %q", t.name)
		case 2:
			return nil
		}
		state[t] = 1
		for _, in := range t.inputs {
			if err := visit(in.from, in.n); err != nil {
				return err
			}
		}
		for _, sd := range t.sides {
			if err := visit(sd.from, sd.n); err != nil {
				return err
			}
		}
		state[t] = 2
		out = append(out, t)
		return nil
	}
	for _, t := range l.specs {
		if err := visit(t, t.n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (l *loader) build() error {
	l.p = weir.NewPipeline()
	l.root = l.p.Root()
	order, err := l.order()
	if err != nil {
		return err
	}
	for _, t := range order {
		if err := l.buildOne(t); err != nil {
			return err
		}
		if err := l.p.Err(); err != nil {
			return l.wrapf(t.n, err, "building %q", t.name)
		}
	}
	return nil
}

// path resolves a file path of the pipeline against Options.BaseDir.
func (l *loader) path(p string) string {
	if l.opts.BaseDir == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(l.opts.BaseDir, p)
}

// coll is a built collection: rows of a schema, or an error output
// (contract.Reject values, seen downstream as rows of row.RejectSchema()).
type coll struct {
	schema   *row.Schema
	rows     weir.PCollection[*row.Row]
	rejects  weir.PCollection[contract.Reject]
	isReject bool
	// renamed maps a field renamed in place to its old name: a Combine's
	// outputs declared renamed_from, which a WriteToSql reading them
	// renames its columns by.
	renamed map[string]string
	// notRenames maps a Combine's new output to the outputs the running
	// version had and this one removed that stored something else: a
	// WriteToSql reading the Combine does not take the new column for a
	// rename of those (sqlsink.Config.NotRenamedFrom).
	notRenames map[string][]string
	// keyStep names the Combine that produced the rows, and rekey is its
	// declared re-key (nil without one): a WriteToSql keyed by its key
	// re-keys its table with it (sqlsink.Rekey).
	keyStep string
	rekey   *combineRekey
	// upstream are the declared re-keys of Combines the rows come from
	// through other steps (not the Combine's own output): a table they
	// reach is not re-keyed with them (sqlsink.Config.RekeyedUpstream).
	upstream []*combineRekey
}

func rowsColl(s *row.Schema, c weir.PCollection[*row.Row]) *coll {
	return &coll{schema: s, rows: c}
}

func (c *coll) valid() bool {
	if c.isReject {
		return c.rejects.Valid()
	}
	return c.rows.Valid()
}

// stepOpts are the options every YAML step carries: URN and YAML config.
func stepOpts(t *transformSpec, extra ...weir.StepOption) []weir.StepOption {
	cfg := t.config.Plain()
	if cfg == nil {
		cfg = map[string]any{}
	}
	if m, ok := cfg.(map[string]any); ok && len(t.hints) > 0 {
		m[resourceHintsKey] = t.hints
	}
	opts := []weir.StepOption{weir.WithURN("weir:yaml:" + t.typ), weir.WithConfig(cfg)}
	return append(opts, extra...)
}

// errorOpt declares t's error output, if any.
func errorOpt(t *transformSpec) []weir.StepOption {
	if t.errOut == "" {
		return nil
	}
	return []weir.StepOption{weir.WithErrorOutput(t.errOut), weir.WithErrorCoder(row.RejectSchema().Coder())}
}

// registerErrors records the error output of the step that produced main.
func (l *loader) registerErrors(t *transformSpec, main weir.PCollection[*row.Row]) {
	if t.errOut == "" || !main.Valid() {
		return
	}
	errs := weir.ErrorOutput(main)
	l.outs[t.name+"."+t.errOut] = &coll{schema: row.RejectSchema(), rejects: errs, isReject: true}
}

func (l *loader) buildOne(t *transformSpec) error {
	ins := make([]*coll, len(t.inputs))
	for i, in := range t.inputs {
		key := in.from.name
		if in.tag != "" {
			key += "." + in.tag
		}
		c, ok := l.outs[key]
		if !ok || !c.valid() {
			return l.errf(in.n, "input %q could not be built", in.text)
		}
		ins[i] = c
	}
	if t.windowing != nil && !t.def.source && t.typ != "WindowInto" {
		ws, err := l.windowing(t.windowing)
		if err != nil {
			return err
		}
		for i, c := range ins {
			name := "Window"
			if len(ins) > 1 {
				name = fmt.Sprintf("Window%d", i)
			}
			ins[i] = windowInto(l.root.Sub(t.name), name, c, ws, weir.WithURN("weir:yaml:WindowInto"), weir.WithConfig(t.windowing.Plain()))
		}
	}
	out, err := t.def.build(l, t, ins)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if out.keyStep == "" {
		// Rows derived from a re-keyed Combine's carry its re-key along
		// (a keyed step's rows are keyed by its own key).
		for _, in := range ins {
			if in == out {
				continue
			}
			if in.rekey != nil {
				out.upstream = append(out.upstream, in.rekey)
			}
			out.upstream = append(out.upstream, in.upstream...)
		}
	}
	if t.windowing != nil && t.def.source {
		ws, err := l.windowing(t.windowing)
		if err != nil {
			return err
		}
		out = windowInto(l.root.Sub(t.name), "Window", out, ws, weir.WithURN("weir:yaml:WindowInto"), weir.WithConfig(t.windowing.Plain()))
	}
	l.outs[t.name] = out
	return nil
}
