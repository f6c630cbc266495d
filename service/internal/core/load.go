package core

// Loading a job's pipeline from its record, and the delivery guarantee a
// loaded program gives.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/yamlpipe"
)

// UnmarshalJob decodes a stored job record into j.
func UnmarshalJob(b []byte, j *record.Job) error {
	if err := json.Unmarshal(b, j); err != nil {
		return fmt.Errorf("decoding a job record: %w", err)
	}
	return nil
}

// load compiles j's pipeline for j's run.
func (s *Core) Load(j *record.Job) (*weir.Pipeline, error) {
	return s.loadYAML(j, false)
}

// loadGraph compiles j's pipeline for its graph only (yamlpipe's
// GraphOnly: no sink checks its table), for the compatibility check of a
// pipeline that does not load for a run. The result must not be run.
func (s *Core) LoadGraph(j *record.Job) (*weir.Pipeline, error) {
	return s.loadYAML(j, true)
}

func (s *Core) loadYAML(j *record.Job, graphOnly bool) (*weir.Pipeline, error) {
	if j.SDK == record.SDKGo {
		return s.LoadProgram(j)
	}
	env := &yamlpipe.JobEnv{Name: j.Name, ID: j.ID, Generation: j.Generation, DataDir: s.Opts.DataDir, Broker: s.Opts.Broker,
		Subscriptions: j.Subscriptions, Manifests: manifestStore{s}, Partition: j.Partition, Manifest: j.Manifest,
		ManifestDigest: j.ManifestDigest, Shadow: j.Shadow}
	prior := s.priorGraph(j) // read and parsed once, for each use below
	snap := s.snapshotGraph(j.CreatedFromSnapshotID)
	env.PriorRenamedColumns = priorRenamedColumns(prior)
	env.PriorConverted = priorConverted(prior)
	env.PriorKeyLayouts = priorKeyLayouts(j, prior, snap)
	env.FromSnapshot = j.CreatedFromSnapshotID != ""
	for _, f := range s.flows {
		f.Environment(j, env)
	}
	sg, own := stateGraph(j, prior, snap)
	var mapping compat.Mapping // the steps of j's own graph have their names
	if !own {
		mapping = j.TransformNameMapping
	}
	slots, stored := compat.CombineSlotsByStep(sg, mapping)
	p, err := yamlpipe.Load(j.PipelineFile, []byte(j.Pipeline), yamlpipe.Options{BaseDir: j.BaseDir, Job: env, GraphOnly: graphOnly,
		Access: s.Opts.Access, CheckOutputs: !graphOnly, PriorCombineSlots: slots, PriorCombineStored: stored,
		LogOutput: logWriter{s: s, id: j.ID}}) // LogForTesting lines become the job's events
	if err != nil {
		return nil, errcode.Errorf(loadCode(err), "%w", err)
	}
	if err := p.Err(); err != nil {
		return nil, errcode.Errorf(errcode.InvalidPipeline, "%s: %w", j.PipelineFile, err)
	}
	if !graphOnly {
		prog := p.Program()
		for _, f := range s.flows {
			f.Program(j, prog)
		}
	}
	return p, nil
}

// loadCode returns the code of err, an error of a pipeline's load or of
// one of its sinks' checks.
func loadCode(err error) errcode.Code {
	switch {
	case errors.Is(err, yamlpipe.ErrSchemaChange):
		return errcode.SQLSchemaChangeRefused
	case errors.Is(err, yamlpipe.ErrIdentifierTooLong):
		return errcode.SQLIdentifierTooLong
	}
	return AccessCode(err)
}

// CheckSinks runs again the checks the load of p (from file) ran on its
// sinks against their tables and stores (each sink's Validate, which
// connects and disconnects again), and gives an error the code the load
// would have given it. A sink sets its table up at its job's first
// commit, so what the load checked against may have changed since: an
// update checks again once the running job can commit nothing more.
func CheckSinks(ctx context.Context, file string, p *weir.Pipeline) error {
	prog := p.Program()
	for _, st := range prog.Graph.Steps {
		v, ok := prog.Code[st.Name].(interface{ Validate(context.Context) error })
		if st.Kind != graph.KindSink || !ok {
			continue
		}
		if err := v.Validate(ctx); err != nil {
			return errcode.Errorf(loadCode(err), "%s: step %s: %w", file, st.Name, err)
		}
	}
	return nil
}

// delivery says which guarantee prog can give when checkpointed: exactly
// once only if every source resumes from positions and every sink commits
// per epoch.
func delivery(prog *contract.Program, checkpointed bool) (string, string) {
	if !checkpointed {
		return record.DeliveryAtLeastOnce, "the job takes no checkpoints: after a restart it runs again from the beginning of its sources"
	}
	var sources, sinks []string
	for _, st := range prog.Graph.Steps {
		code := prog.Code[st.Name]
		switch st.Kind {
		case graph.KindSource:
			if _, ok := code.(contract.ResumableSource); !ok {
				sources = append(sources, st.Name)
			}
		case graph.KindSink:
			if _, ok := code.(contract.TransactionalSink); !ok {
				sinks = append(sinks, st.Name)
			}
		}
	}
	sort.Strings(sources)
	sort.Strings(sinks)
	var notes []string
	if len(sources) > 0 {
		notes = append(notes, fmt.Sprintf("source(s) %s cannot resume from a checkpoint and restart from their beginning after a restart", strings.Join(sources, ", ")))
	}
	if len(sinks) > 0 {
		notes = append(notes, fmt.Sprintf("sink(s) %s write outside checkpoints (file sinks are for batch runs)", strings.Join(sinks, ", ")))
	}
	if len(notes) == 0 {
		return record.DeliveryExactlyOnce, ""
	}
	return record.DeliveryAtLeastOnce, strings.Join(notes, "; ")
}

// priorRenamedColumns returns, by SQL sink step, the fields that g, the
// graph of the job a job replaces (priorGraph), declared renamed in place
// (a Combine's renamed_from), so that the job's sinks can rename a column
// back when it writes the old name again (a rollback). Nil without g (its
// sinks then refuse what looks like a rename, as without one).
func priorRenamedColumns(g *graph.Pipeline) map[string]map[string]string {
	if g == nil {
		return nil
	}
	var out map[string]map[string]string
	for _, st := range g.Steps {
		if st.Kind != graph.KindSink {
			continue
		}
		c := g.Collection(st.Inputs[graph.MainTag])
		if c == nil {
			continue
		}
		if r := compat.RenamedOutputs(g.Step(c.Producer)); len(r) > 0 {
			if out == nil {
				out = map[string]map[string]string{}
			}
			out[st.Name] = r
		}
	}
	return out
}

// priorConverted returns, by WriteToSql step of g (the graph of the job
// being replaced), the columns its config declares converted (convert: a
// list, or a map of columns); nil for none.
func priorConverted(g *graph.Pipeline) map[string][]string {
	if g == nil {
		return nil
	}
	var out map[string][]string
	for _, st := range g.Steps {
		if cols := compat.ConvertedColumns(st); len(cols) > 0 {
			if out == nil {
				out = map[string][]string{}
			}
			out[st.Name] = slices.Sorted(maps.Keys(cols))
		}
	}
	return out
}

// priorKeyLayouts returns, by step of the job j replaces (g, its graph:
// priorGraph), or, for a job created from a snapshot that replaces none,
// of the snapshot's job (snap, its graph: snapshotGraph), the key layout
// of its declared re-key (yamlpipe.KeyLayout per key field), "" for a
// step that declared none; nil when there is no such job or its graph
// cannot be read (j's sinks then re-key nothing).
func priorKeyLayouts(j *record.Job, g, snap *graph.Pipeline) map[string]string {
	if g == nil && j.ReplacesJobID == "" {
		g = snap
	}
	if g == nil {
		return nil
	}
	out := make(map[string]string, len(g.Steps))
	for _, st := range g.Steps {
		layout := ""
		if compat.RekeyedFrom(st) != nil && st.KeyCoder != nil {
			for _, f := range st.KeyCoder.Fields {
				layout += yamlpipe.KeyLayout(f.Name, f.Type)
			}
		}
		out[st.Name] = layout
	}
	return out
}

// stateGraph returns the graph of the job whose stored state j reads,
// as far as it decides how that state is laid out, and whether it is j's
// own: j's own graph once it has one (a restart), else snap (the graph of
// the snapshot j is created from), else prior (the graph of the job j
// replaces). Nil when none can be read.
func stateGraph(j *record.Job, prior, snap *graph.Pipeline) (*graph.Pipeline, bool) {
	if g := parsedGraph(j.Graph); g != nil {
		return g, true
	}
	if snap != nil {
		return snap, false
	}
	return prior, false
}

// snapshotGraph returns the graph snapshot id recorded, or nil when id
// is empty or its record or graph cannot be read.
func (s *Core) snapshotGraph(id string) *graph.Pipeline {
	if id == "" {
		return nil
	}
	snap, err := GetJSON[record.Snapshot](s, record.SnapshotKey(id), "snapshot", nil)
	if err != nil {
		return nil
	}
	return parsedGraph(snap.Graph)
}

// priorGraph returns the graph of the job j replaces, or nil when it
// replaces none or its record or graph cannot be read.
func (s *Core) priorGraph(j *record.Job) *graph.Pipeline {
	if j.ReplacesJobID == "" {
		return nil
	}
	prev, err := s.ReadJob(j.ReplacesJobID)
	if err != nil {
		return nil
	}
	return parsedGraph(prev.Graph)
}

// parsedGraph returns the graph a record holds, or nil when it holds
// none or it does not parse.
func parsedGraph(b json.RawMessage) *graph.Pipeline {
	if len(b) == 0 {
		return nil
	}
	g, err := graph.Parse(b)
	if err != nil {
		return nil
	}
	return g
}
