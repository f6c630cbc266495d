// Package graph is the pipeline graph model: steps, collections, coders and
// windowing, with a canonical JSON form that round-trips and can be diffed.
// It is the contract between the front doors (Go SDK, YAML), the runner and
// compatibility checks. It knows nothing of execution.
//
// It may import only window and the standard library (mtime reaches it
// through window).
package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/weir-dev/weir/window"
)

// FormatVersion is the version of the canonical JSON form.
const FormatVersion = 1

// Kind names what a step does.
type Kind string

// Step kinds.
const (
	KindSource        Kind = "source"
	KindParDo         Kind = "pardo"
	KindWindowInto    Kind = "window_into"
	KindGroupByKey    Kind = "group_by_key"
	KindCombinePerKey Kind = "combine_per_key"
	KindStatefulParDo Kind = "stateful_pardo"
	KindFlatten       Kind = "flatten"
	KindSink          Kind = "sink"
)

// IsKeyed reports whether steps of kind k partition their input by key and
// keep state.
func (k Kind) IsKeyed() bool {
	return k == KindGroupByKey || k == KindCombinePerKey || k == KindStatefulParDo
}

// Tag names of the outputs every step may have.
const (
	MainTag = "main"
)

// Coder is the identity of an encoding: a URN, parameters, and components
// (for composite coders such as KV) or fields (for row coders).
type Coder struct {
	URN        string            `json:"urn"`
	Version    int               `json:"version,omitempty"`
	Params     map[string]string `json:"params,omitempty"`
	Components []Coder           `json:"components,omitempty"`
	Fields     []Field           `json:"fields,omitempty"`
}

// Field is one named, typed field of a row coder.
type Field struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// RetiredSlot returns the field of a YAML Combine's stored accumulator
// coder (one field per slot: the slot's fn and value type) for a retired
// slot: that of an output an update removed from before outputs the step
// still has, kept empty so that the slots after it stay where the stored
// state has them.
func RetiredSlot() Field { return Field{Name: "retired", Type: "none"} }

// Equal reports whether two coder identities match exactly.
func (c Coder) Equal(o Coder) bool {
	a, _ := json.Marshal(c)
	b, _ := json.Marshal(o)
	return bytes.Equal(a, b)
}

// String renders the coder identity compactly.
func (c Coder) String() string {
	var b strings.Builder
	b.WriteString(c.URN)
	if len(c.Fields) > 0 {
		b.WriteString("{")
		for i, f := range c.Fields {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(f.Name + ":" + f.Type)
		}
		b.WriteString("}")
	}
	if len(c.Components) > 0 {
		b.WriteString("<")
		for i, sub := range c.Components {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(sub.String())
		}
		b.WriteString(">")
	}
	return b.String()
}

// SideInput is a collection a step reads as a materialised view.
type SideInput struct {
	Name       string `json:"name"`
	Collection string `json:"collection"`
	// View is singleton, list or map.
	View string `json:"view"`
}

// Side input views.
const (
	ViewSingleton = "singleton"
	ViewList      = "list"
	ViewMap       = "map"
)

// StateSpec declares one state cell of a stateful step.
type StateSpec struct {
	ID    string    `json:"id"`
	Kind  StateKind `json:"kind"`
	Coder Coder     `json:"coder"`
	// MigratedFrom is the coder of the values an earlier version stored in
	// the cell, when the step declares how they become Coder's
	// (weir.MigrateState); nil otherwise.
	MigratedFrom *Coder `json:"migrated_from,omitempty"`
}

// StateKind names what a state cell holds; it is part of the canonical
// JSON form, so its strings never change.
type StateKind string

// State cell kinds.
const (
	// StateValue: one value per key (and window); Coder encodes it.
	StateValue StateKind = "value"
	// StateBag: the elements added to it, unordered; Coder encodes one.
	StateBag StateKind = "bag"
	// StateMap: a map per key; Coder is weir:coder:map of the key and value coders.
	StateMap StateKind = "map"
	// StateCombining: an accumulator that added values are combined into;
	// Coder encodes the accumulator. The graph format has it; the SDK has
	// no constructor for it yet.
	StateCombining StateKind = "combining"
)

// TimerSpec declares one timer family of a stateful step.
type TimerSpec struct {
	ID string `json:"id"`
	// Domain is the time the timers fire in; serialized as its string
	// (event_time or processing_time).
	Domain TimeDomain `json:"domain"`
}

// TimeDomain is the time a timer fires in.
type TimeDomain string

// Timer domains.
const (
	// EventTime timers fire when the input watermark passes their time.
	EventTime TimeDomain = "event_time"
	// ProcessingTime timers fire when processing time reaches their time.
	ProcessingTime TimeDomain = "processing_time"
)

// IOIdentity names what a source reads or a sink writes, so an update can
// tell whether it still reads the same thing.
type IOIdentity struct {
	Kind     string `json:"kind"`
	Identity string `json:"identity"`
	Bounded  bool   `json:"bounded"`
}

// FnRef references the code of a step by registered name, never its body,
// plus the configuration that parameterises it.
type FnRef struct {
	URN    string          `json:"urn"`
	Config json.RawMessage `json:"config,omitempty"`
}

// Step is one named transform.
type Step struct {
	Name string `json:"name"`
	Kind Kind   `json:"kind"`
	// Inputs maps an input tag to a collection ID. Flatten has one tag per input.
	Inputs map[string]string `json:"inputs,omitempty"`
	// Outputs maps an output tag to a collection ID.
	Outputs    map[string]string `json:"outputs,omitempty"`
	SideInputs []SideInput       `json:"side_inputs,omitempty"`
	Fn         *FnRef            `json:"fn,omitempty"`
	// KeyCoder is the identity of the key of a keyed step.
	KeyCoder *Coder `json:"key_coder,omitempty"`
	// StoredCoder is the identity of what a keyed step stores per key: the
	// accumulator of a combine, or the buffered values of a GroupByKey.
	StoredCoder *Coder `json:"stored_coder,omitempty"`
	// AccumulatorFrom is the accumulator identity (StoredCoder without its
	// params) a combine declares it migrates from: stored accumulators of
	// that type are read through the step's migration (the Go SDK's
	// MigrateAccumulator), so an update that changes the accumulator keeps
	// the state.
	AccumulatorFrom *Coder `json:"accumulator_from,omitempty"`
	// KeyFrom is the key identity a combine declares it re-keys from (the
	// Go SDK's RekeyFrom): stored keys of that type move to the step's
	// key, so an update that changes the key keeps the state.
	KeyFrom *Coder      `json:"key_from,omitempty"`
	State   []StateSpec `json:"state,omitempty"`
	Timers  []TimerSpec `json:"timers,omitempty"`
	// Windowing is the strategy a window_into step sets on its output.
	Windowing *window.Strategy `json:"windowing,omitempty"`
	Source    *IOIdentity      `json:"source,omitempty"`
	Sink      *IOIdentity      `json:"sink,omitempty"`
	// ErrorOutput is the output tag that receives rejected elements, if declared.
	ErrorOutput string `json:"error_output,omitempty"`
}

// Collection is a typed stream of elements.
type Collection struct {
	ID        string          `json:"id"`
	Producer  string          `json:"producer"`
	Coder     Coder           `json:"coder"`
	Windowing window.Strategy `json:"windowing"`
	Bounded   bool            `json:"bounded"`
}

// Pipeline is a graph of named steps connected by collections.
type Pipeline struct {
	FormatVersion int           `json:"format_version"`
	Steps         []*Step       `json:"steps"`
	Collections   []*Collection `json:"collections"`
}

// New returns an empty pipeline graph.
func New() *Pipeline { return &Pipeline{FormatVersion: FormatVersion} }

// nameRE is the rule for one segment of a step name.
// ('@' is for Beam YAML's automatic names of repeated unnamed transforms,
// TYPE@LINE).
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.@\- ]*$`)

// ValidateName reports a step name that cannot serve as a stable identity.
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("step name is empty: every step needs a stable, user-given name")
	}
	for _, seg := range strings.Split(name, "/") {
		if !nameRE.MatchString(seg) {
			return fmt.Errorf("step name %q: each '/'-separated part must be letters, digits, '_', '-', '.', '@' or spaces, not starting with one of '-', '.', '@' or a space", name)
		}
	}
	return nil
}

// Step returns the step with the given name, or nil.
func (p *Pipeline) Step(name string) *Step {
	for _, s := range p.Steps {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Collection returns the collection with the given ID, or nil.
func (p *Pipeline) Collection(id string) *Collection {
	for _, c := range p.Collections {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// AddStep adds s, refusing a duplicate or malformed name.
func (p *Pipeline) AddStep(s *Step) error {
	if err := ValidateName(s.Name); err != nil {
		return err
	}
	if p.Step(s.Name) != nil {
		return fmt.Errorf("duplicate step name %q: step names are identities and must be unique", s.Name)
	}
	p.Steps = append(p.Steps, s)
	return nil
}

// AddOutput creates the collection produced by step on tag and records it.
func (p *Pipeline) AddOutput(s *Step, tag string, c Coder, ws window.Strategy, bounded bool) *Collection {
	col := &Collection{ID: s.Name + "." + tag, Producer: s.Name, Coder: c, Windowing: ws, Bounded: bounded}
	if s.Outputs == nil {
		s.Outputs = map[string]string{}
	}
	s.Outputs[tag] = col.ID
	p.Collections = append(p.Collections, col)
	return col
}

// Consumers returns the steps that read collection id, as main or side input.
func (p *Pipeline) Consumers(id string) []*Step {
	var out []*Step
	for _, s := range p.Steps {
		used := false
		for _, in := range s.Inputs {
			if in == id {
				used = true
			}
		}
		for _, si := range s.SideInputs {
			if si.Collection == id {
				used = true
			}
		}
		if used {
			out = append(out, s)
		}
	}
	return out
}

// Topological returns the steps ordered so that producers come before consumers.
func (p *Pipeline) Topological() ([]*Step, error) {
	producer := map[string]string{}
	for _, c := range p.Collections {
		producer[c.ID] = c.Producer
	}
	deps := map[string][]string{}
	for _, s := range p.Steps {
		for _, in := range sortedValues(s.Inputs) {
			deps[s.Name] = append(deps[s.Name], producer[in])
		}
		for _, si := range s.SideInputs {
			deps[s.Name] = append(deps[s.Name], producer[si.Collection])
		}
	}
	var order []*Step
	state := map[string]int{}
	byName := map[string]*Step{}
	for _, s := range p.Steps {
		byName[s.Name] = s
	}
	var visit func(name string) error
	visit = func(name string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("the pipeline has a cycle through step %q", name)
		case 2:
			return nil
		}
		state[name] = 1
		for _, d := range deps[name] {
			if d == "" {
				continue
			}
			if err := visit(d); err != nil {
				return err
			}
		}
		state[name] = 2
		if s := byName[name]; s != nil {
			order = append(order, s)
		}
		return nil
	}
	for _, s := range p.Steps {
		if err := visit(s.Name); err != nil {
			return nil, err
		}
	}
	return order, nil
}

func sortedValues(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

// Validate checks that every input refers to a known collection.
func (p *Pipeline) Validate() error {
	for _, s := range p.Steps {
		for tag, in := range s.Inputs {
			if p.Collection(in) == nil {
				return fmt.Errorf("step %q input %q refers to unknown collection %q", s.Name, tag, in)
			}
		}
		for _, si := range s.SideInputs {
			if p.Collection(si.Collection) == nil {
				return fmt.Errorf("step %q side input %q refers to unknown collection %q", s.Name, si.Name, si.Collection)
			}
		}
	}
	_, err := p.Topological()
	return err
}

// Canonical returns the canonical JSON of p: steps sorted by name,
// collections by ID, map keys sorted, indented for diffing.
func (p *Pipeline) Canonical() ([]byte, error) {
	c := *p
	c.FormatVersion = FormatVersion
	c.Steps = append([]*Step(nil), p.Steps...)
	sort.Slice(c.Steps, func(i, j int) bool { return c.Steps[i].Name < c.Steps[j].Name })
	c.Collections = append([]*Collection(nil), p.Collections...)
	sort.Slice(c.Collections, func(i, j int) bool { return c.Collections[i].ID < c.Collections[j].ID })
	for i, s := range c.Steps {
		if s.Fn != nil && len(s.Fn.Config) > 0 {
			cfg, err := canonicalJSON(s.Fn.Config)
			if err != nil {
				return nil, fmt.Errorf("step %q config: %w", s.Name, err)
			}
			cp := *s
			fn := *s.Fn
			fn.Config = cfg
			cp.Fn = &fn
			c.Steps[i] = &cp
		}
	}
	return json.MarshalIndent(&c, "", "  ")
}

// canonicalJSON re-encodes raw JSON with sorted object keys.
func canonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// Parse reads a pipeline from its JSON form.
func Parse(data []byte) (*Pipeline, error) {
	var p Pipeline
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("parsing pipeline graph: %w", err)
	}
	if p.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("pipeline graph format version %d is not supported (this weir reads %d)", p.FormatVersion, FormatVersion)
	}
	return &p, nil
}

// UnboundedSources returns, sorted, the names of the source steps that
// produce an unbounded collection: a pipeline with none completes by itself.
func (p *Pipeline) UnboundedSources() []string {
	var names []string
	for _, s := range p.Steps {
		if s.Kind != KindSource {
			continue
		}
		bounded := s.Source == nil || s.Source.Bounded
		for _, id := range s.Outputs {
			if c := p.Collection(id); c != nil && !c.Bounded {
				bounded = false
			}
		}
		if !bounded {
			names = append(names, s.Name)
		}
	}
	sort.Strings(names)
	return names
}
