package api

import (
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service"
)

// SubmitRequest is the body of POST /v1/jobs.
type SubmitRequest struct {
	// Name is the job name ([a-z]([-a-z0-9]*[a-z0-9])?).
	Name string `json:"name"`
	// Pipeline is the YAML text of the pipeline.
	Pipeline string `json:"pipeline"`
	// PipelineFile names the pipeline in error messages (the client's path).
	PipelineFile string `json:"pipeline_file,omitempty"`
	// BaseDir is the absolute directory relative paths in the pipeline
	// resolve against (the client's working directory).
	BaseDir string             `json:"base_dir"`
	Options service.JobOptions `json:"options"`
	// ServiceOptions are Dataflow's service options, verbatim ("KEY" or
	// "KEY=VALUE"; package serviceopt): create_or_update_job, a replacement
	// under a new name (parallel_replace_job_name=OLD), ...
	ServiceOptions []string `json:"service_options,omitempty"`
	// RequestID makes the request idempotent for 24 hours.
	RequestID string `json:"request_id,omitempty"`
}

// serviceRequest is the service's form of r.
func (r SubmitRequest) serviceRequest() service.SubmitRequest {
	return service.SubmitRequest{Name: r.Name, Pipeline: r.Pipeline, PipelineFile: r.PipelineFile,
		BaseDir: r.BaseDir, Options: r.Options, ServiceOptions: r.ServiceOptions, RequestID: r.RequestID}
}

// SubmitResponse is the reply to a submission.
type SubmitResponse struct {
	ID    string           `json:"id"`
	Name  string           `json:"name"`
	State service.JobState `json:"state"`
	// Error is why the job failed to start, when State is FAILED.
	Error string `json:"error,omitempty"`
	// Replacement is the strategy of the replacement flow the job is the
	// new job of (stop_and_replace, parallel); empty for a new job or an
	// in-place update.
	Replacement string `json:"replacement,omitempty"`
}

// JobList is the reply to GET /v1/jobs.
type JobList struct {
	Jobs []service.Summary `json:"jobs"`
}

// ErrorBody is the body of every error reply.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is a stable code and a message for the user.
type ErrorDetail struct {
	Code    errcode.Code `json:"code"`
	Message string       `json:"message"`
}
