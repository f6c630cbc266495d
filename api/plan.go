package api

import (
	"encoding/json"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/plan"
)

// updatePlan is the plan of a validate-only update: the running job's
// stored graph against the new pipeline's (newGraph, as the check read
// it), with the keys the running job's steps hold. nil when there is no
// running job or graph to plan from: the report already says why.
func (s *Server) updatePlan(req UpdateRequest, newGraph json.RawMessage) *client.Plan {
	if len(newGraph) == 0 {
		return nil
	}
	j, err := s.svc.Get(req.Name)
	if err != nil || !j.Active() || len(j.Graph) == 0 {
		return nil
	}
	old, err := graph.Parse(j.Graph)
	if err != nil {
		return nil
	}
	newp, err := graph.Parse(newGraph)
	if err != nil {
		return nil
	}
	mapping, err := compat.ParseMapping(req.TransformNameMapping)
	if err != nil {
		return nil
	}
	// Options that do not combine were refused before a plan is asked
	// for; should they reach here, the plan describes an in-place update.
	opts, err := plan.ForServiceOptions(req.ServiceOptions)
	if err != nil {
		opts = plan.Options{Strategy: plan.InPlace}
	}
	opts.Check = compat.Options{Mapping: mapping, AllowSourceChange: req.AllowSourceChange}
	// The describe's metrics: they count each aggregation's open windows.
	if m, err := s.svc.DescribeMetrics(j.ID); err == nil && m != nil {
		opts.Keys, opts.Windows = map[string]int64{}, map[string]plan.OpenWindows{}
		for _, st := range m.Steps {
			if st.Keys != nil {
				opts.Keys[st.Name] = *st.Keys
			}
			if st.OpenWindows != nil {
				opts.Windows[st.Name] = plan.OpenWindows{N: *st.OpenWindows, Estimated: st.OpenWindowsEstimated}
			}
		}
		opts.KeysFrom = "the running job " + j.ID + "'s metrics"
	}
	return wirePlan(plan.Make(old, newp, opts))
}

// wirePlan converts a plan to its wire type through their common JSON
// form (the field names are the contract of both).
func wirePlan(p plan.Plan) *client.Plan {
	b, err := json.Marshal(p)
	if err != nil {
		return nil
	}
	var out client.Plan
	if err := json.Unmarshal(b, &out); err != nil {
		return nil
	}
	return &out
}
