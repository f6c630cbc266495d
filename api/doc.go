// Package api is weir's JSON HTTP API, served by `weir server`: job
// submission, listing, description, drain and cancel (under /v1/jobs),
// Prometheus metrics (/metrics) and a health check (/healthz). It also
// holds the Go client the CLI uses.
//
// Routes (Go 1.22 net/http patterns, no framework):
//
//	POST /v1/jobs                       submit {name, pipeline, pipeline_file, base_dir, options: {num_workers}} → 201 {id, name, state}
//	GET  /v1/jobs?status=active|terminated|all   → {jobs: [summary...]} newest first
//	GET  /v1/jobs/{id_or_name}          the job record, with live metrics while it runs
//	POST /v1/jobs/{id_or_name}:drain    (or /drain) → the job's summary
//	POST /v1/jobs/{id_or_name}:cancel   (or /cancel) → the job's summary
//	GET  /metrics                       Prometheus text format, per job and per step
//	GET  /healthz                       {"status": "ok"}
//
// A name means the name's active job, or its latest job when none is
// active. Every error is {"error": {"code": CODE, "message": "..."}} with a
// code from the service's registry (service.Code); the status follows the
// code's kind: 400 invalid, 404 not found, 409 conflict, 503 shutting down,
// 500 internal. Request bodies with unknown fields are refused.
//
// It may import service, the Prometheus client and the standard library;
// it knows nothing of the runner, the store or YAML.
package api
