package service

// The pre-flight gate of a stop-and-replace or in-place update
// (weir_rehearse=required[;since=D]): before anything changes, the running
// job's pipeline and the new one run, each in a sandbox (package sandbox,
// as `weir rehearse` runs them), over the input the job's topics retain
// since D ago, and the update is refused (PARITY_FAILED) when their
// outputs differ beyond weir_parity_budget.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/weir-dev/weir/diff"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/sandbox"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/serviceopt"
	"github.com/weir-dev/weir/state"
)

// preflight rehearses req's pipeline against the running job it would
// change (ref: the name, or the job a replacement under another name
// replaces) when plan asks for it, and refuses the update, recording the
// attempt and a parity_gate event, when the outputs differ beyond the
// budget or the rehearsal cannot run. A validate-only request is
// rehearsed too. A refusal returns the verdict beside the error when the
// rehearsal ran.
func (s *Service) preflight(ctx context.Context, req UpdateRequest, plan serviceopt.Plan) (*record.RehearsalVerdict, error) {
	if !plan.Rehearse {
		return nil, nil
	}
	ref := req.Name
	if plan.ReplaceJobID != "" {
		ref = plan.ReplaceJobID
	} else if plan.ReplaceJobName != "" {
		ref = plan.ReplaceJobName
	}
	old, err := s.core.Get(ref)
	if err != nil {
		return nil, err
	}
	v, err := s.rehearse(ctx, old, req, plan)
	if err != nil {
		return nil, errcode.Errorf(errcode.ParityFailed, "%s=required: the rehearsal of job %s (%s) against the new pipeline could not run: %v; the job was not changed", serviceopt.KeyRehearse, old.Name, old.ID, err)
	}
	msg := fmt.Sprintf("pre-flight rehearsal over %d input element(s) since %s: %d difference(s) in %d row(s) compared, budget %d",
		v.Elements, v.Since.Format(time.RFC3339), v.Differences, v.RowsCompared, v.Budget)
	details := map[string]any{"rehearsal": true, "outcome": "PASSED", "rows_compared": v.RowsCompared, "differing_rows": v.Differences,
		"noise": v.Noise, "budget": v.Budget, "elements": v.Elements, "since": v.Since.Format(time.RFC3339),
		"trace_bytes": v.TraceBytes, "trace_spilled_bytes": v.TraceSpilledBytes}
	if len(v.Examples) > 0 {
		details["examples"] = v.Examples
	}
	if v.Passed {
		s.core.Emit(old.ID, record.EventParityGate, record.SeverityInfo, msg+": passed", details)
		return v, nil
	}
	details["outcome"] = "REFUSED"
	s.core.Emit(old.ID, record.EventParityGate, record.SeverityWarning, msg+": the update is refused", details)
	w := &state.Write{}
	now := s.core.Now()
	a := core.Attempt{Time: now, Name: old.Name, RunningJobID: old.ID, ValidateOnly: req.ValidateOnly, Pipeline: req.Pipeline, Rehearsal: v}
	a.Report.Compatible = true
	if err := core.PutJSON(w, core.AttemptKey(old.Name, now), a); err != nil {
		return nil, err
	}
	if err := s.core.Apply(w); err != nil {
		return nil, errcode.Internalf("recording the update attempt: %w", err)
	}
	ex := ""
	if len(v.Examples) > 0 {
		ex = "; e.g. " + strings.Join(v.Examples, "; ")
	}
	return v, errcode.Errorf(errcode.ParityFailed, "%s=required: the new pipeline's outputs differ from job %s (%s)'s on its input since %s: %d difference(s) in %d row(s) compared, more than the budget of %d (%s)%s; the job was not changed (weir rehearse %s NEW.yaml --since %s shows the whole report)",
		serviceopt.KeyRehearse, old.Name, old.ID, v.Since.Format(time.RFC3339), v.Differences, v.RowsCompared, v.Budget, serviceopt.KeyParityBudget, ex, old.Name, v.Since.Format(time.RFC3339))
}

// rehearse runs old's pipeline (twice, for its noise) and req's over the
// messages old's topics retain since plan.RehearseSince ago, and compares
// their outputs.
func (s *Service) rehearse(ctx context.Context, old *record.Job, req UpdateRequest, plan serviceopt.Plan) (*record.RehearsalVerdict, error) {
	since := s.core.Now().Add(-plan.RehearseSince)
	opts := sandbox.Options{BaseDir: old.BaseDir, TempDir: s.core.Opts.DataDir, Logger: s.core.Opts.Logger}
	oldName := old.PipelineFile
	if oldName == "" {
		oldName = old.Name + ".yaml"
	}
	oldP, err := sandbox.Load(oldName, []byte(old.Pipeline), opts)
	if err != nil {
		return nil, fmt.Errorf("loading job %s's pipeline: %w", old.ID, err)
	}
	rb, ok := s.core.Opts.Broker.(sandbox.RetainedReader)
	if !ok || s.core.Opts.Broker == nil {
		return nil, fmt.Errorf("the server has no Pub/Sub broker to read the job's retained input from")
	}
	// The server's own budget and spill directory (--rehearse-trace-memory,
	// --rehearse-trace-dir): a client asks for a rehearsal, not for where
	// the server's memory and disk go.
	trace := &sandbox.Trace{MaxMemory: s.core.Opts.RehearseTraceMemory, SpillDir: s.core.Opts.RehearseTraceDir}
	defer trace.Close()
	if err := trace.AppendRetained(ctx, rb, oldP, since); err != nil {
		if errors.Is(err, sandbox.ErrNoRecordedInput) {
			return nil, fmt.Errorf("job %s reads no Pub/Sub topic, so it has no retained input to rehearse on", old.ID)
		}
		return nil, err
	}
	newOpts := opts
	newOpts.BaseDir = req.BaseDir
	if req.Mapping != "" {
		if err := json.Unmarshal([]byte(req.Mapping), &newOpts.NameMapping); err != nil {
			return nil, fmt.Errorf("the transform name mapping: %w", err)
		}
	}
	newName := req.PipelineFile
	if newName == "" {
		newName = req.Name + ".yaml"
	}
	var results []*sandbox.Result
	defer func() {
		for _, r := range results {
			r.Close()
		}
	}()
	for _, run := range []struct {
		what, name, src string
		opts            sandbox.Options
	}{{"old", oldName, old.Pipeline, opts}, {"old (second)", oldName, old.Pipeline, opts}, {"new", newName, req.Pipeline, newOpts}} {
		res, err := sandbox.Run(ctx, run.name, []byte(run.src), trace, run.opts)
		if err != nil {
			return nil, fmt.Errorf("the %s run: %w", run.what, err)
		}
		results = append(results, res)
	}
	sides := make([]diff.Side, 3)
	for i, r := range results {
		var err error
		if sides[i], err = r.Side(); err != nil {
			return nil, err
		}
	}
	rep, err := diff.Run(sides[0], sides[1], sides[2], diff.Options{Budget: plan.ParityBudget, MaxDetails: 3})
	if err != nil {
		return nil, fmt.Errorf("comparing the outputs: %w", err)
	}
	v := &record.RehearsalVerdict{Passed: rep.Identical(), Since: since, Elements: trace.Elements(), Differences: rep.Total, Noise: rep.TotalNoise, Budget: rep.Budget,
		TraceBytes: trace.Size(), TraceSpilledBytes: trace.Spilled()}
	for _, o := range rep.Outputs {
		v.RowsCompared += o.RowsCompared
	}
	for _, d := range rep.Differences {
		v.Examples = append(v.Examples, fmt.Sprintf("output %s, key %s, window %s: %s", d.Output, d.Key, d.Window, d.Class))
	}
	return v, nil
}
