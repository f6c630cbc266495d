package service

import (
	"context"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/yamlpipe"
)

// renderRequestJinja renders req's pipeline with its Jinja variables, when
// it has any (the console's update preview sends them; the CLI renders a
// template itself, where its included files are). Includes are refused:
// the service reads no file a submitted template names. A template that
// does not render is INVALID_PIPELINE (PIPELINE_BUDGET_EXCEEDED past a
// budget), its message at file:line:column.
//
// The render runs in access's Jinja sandbox when it has one (a server's:
// a child process within the render budgets' memory and time).
func renderRequestJinja(ctx context.Context, req *UpdateRequest, access *yamlpipe.Access) error {
	if req.JinjaVariables == nil {
		return nil
	}
	name := req.PipelineFile
	if name == "" {
		name = "pipeline.yaml"
	}
	out, err := yamlpipe.RenderJinjaWith(ctx, name, []byte(req.Pipeline), req.JinjaVariables, true, access.JinjaSandbox(), "")
	if err != nil {
		return errcode.Errorf(core.AccessCode(err), "%w", err)
	}
	req.Pipeline = string(out)
	return nil
}

// withRendered adds the rendered pipeline to an update's result, when the
// request was rendered.
func withRendered(res *UpdateResult, req UpdateRequest) *UpdateResult {
	if res == nil || req.JinjaVariables == nil {
		return res
	}
	out := *res
	out.RenderedPipeline = req.Pipeline
	return &out
}
