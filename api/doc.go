// Package api is weir's JSON HTTP API, served by `weir server`: job
// submission, listing, description, drain and cancel (under /v1/jobs),
// the topics and subscriptions of the embedded Pub/Sub (under /v1/topics
// and /v1/subscriptions, see pubsub.go), Prometheus metrics (/metrics) and
// a health check (/healthz). It also holds the Go client the CLI uses.
//
// Routes (Go 1.22 net/http patterns, no framework):
//
//	POST /v1/jobs                       submit {name, pipeline, pipeline_file, base_dir, options: {num_workers}} → 201 {id, name, state}
//	GET  /v1/jobs?status=active|terminated|all   → {jobs: [summary...]} newest first
//	GET  /v1/jobs/{id_or_name}          the job record, with live metrics while it runs
//	POST /v1/jobs/{id_or_name}:drain    (or /drain) → the job's summary
//	POST /v1/jobs/{id_or_name}:cancel   (or /cancel) → the job's summary
//	POST   /v1/topics                   {name, retention?} → 201 topic
//	GET    /v1/topics                   → {topics: [topic...]} by name
//	GET    /v1/topics/{name}            → topic
//	DELETE /v1/topics/{name}            → 204 (its messages and subscriptions too)
//	POST   /v1/topics/{name}:publish    {messages: [{data, attributes?, id?}]} → {published, duplicates, results}
//	POST   /v1/subscriptions            {name, topic, ack_wait?, from_beginning?} → 201 subscription
//	GET    /v1/subscriptions?topic=T    → {subscriptions: [subscription...]} by name
//	GET    /v1/subscriptions/{name}     → subscription
//	DELETE /v1/subscriptions/{name}     → 204
//	POST   /v1/subscriptions/{name}:pull  {max?, ack?} → {messages: [...]}
//	POST /v1/snapshots, POST /v1/jobs/{id_or_name}:snapshot, GET /v1/snapshots[?job_id=&all=],
//	GET|DELETE /v1/snapshots/{id}, POST /v1/jobs:createFromSnapshot   job snapshots (see snapshots.go)
//	POST /v1/process:release            {name, graph, program, transform_name_mapping, allow_source_change, validate_only}
//	                                    → {report, replaced, released} (Go programs only: WithRelease)
//	GET  /metrics                       Prometheus text format, per job and per step
//	GET  /healthz                       {"status": "ok"}
//
// A name means the name's active job, or its latest job when none is
// active. Every error is {"error": {"code": CODE, "message": "..."}} with a
// code from weir's one registry of codes (package errcode), which gives
// every code its HTTP status (StatusOf): 400 invalid, 405 a route without
// that method, 404 not found, 409 conflict, 503 shutting down or no broker,
// 500 internal. The Pub/Sub routes have their own codes (TOPIC_NOT_FOUND,
// TOPIC_EXISTS, SUBSCRIPTION_NOT_FOUND, SUBSCRIPTION_EXISTS, INVALID_NAME,
// INVALID_CONFIG, PUBSUB_UNAVAILABLE; see PubSubCodes). Request bodies with
// unknown fields are refused.
//
// A Guard (guard.go) stands in front of the routes in every weir process
// (package server wraps the Server in it): bearer-token authentication
// (UNAUTHENTICATED, 401), per-client rate limits (RATE_LIMITED, 429), the
// Host and Origin checks against DNS rebinding and other sites' pages
// (INVALID_HOST, FORBIDDEN_ORIGIN, 403), JSON-only POST, PUT, PATCH and
// DELETE (UNSUPPORTED_MEDIA_TYPE, 415), the body limit MaxRequestBytes
// (REQUEST_TOO_LARGE, 413) and the security headers of every reply
// (nosniff, no framing, no referrer, no caching). See docs/SECURITY.md.
//
// It may import service, compat (the update report), errcode, mtime (the
// rate limiter's clock), io/pubsub (the broker's types, through the PubSub
// interface), github.com/prometheus/client_golang and the standard library.
// It knows nothing of the executor, the store or YAML, which it reaches
// only through package service.
package api
