// Package api is weir's JSON HTTP API, served by `weir server`: job
// submission, listing, description, drain and cancel (under /v1/jobs),
// the topics and subscriptions of the embedded Pub/Sub (under /v1/topics
// and /v1/subscriptions, see pubsub.go), Prometheus metrics (/metrics) and
// a health check (/healthz). Its requests and replies are package client's
// wire types: the handlers convert the service's records to them at the
// edge (wire.go), and wire_test.go pins their JSON byte for byte to the
// records'. The Go client is package client's; the names of it this
// package still exports (Client, NewClient, Error, ...) are aliases.
//
// Routes (Go 1.22 net/http patterns, no framework; TestRouteTable checks
// this table against the routes the server registers, both ways). Every
// POST .../{name}:ACTION route also answers at .../{name}/ACTION.
//
//	POST   /v1/jobs                                submit {name, pipeline, pipeline_file, base_dir, options, service_options?, request_id?, validate_only?} → 201 {id, name, state, replacement?} (200 {report, notes} validate-only: every check, nothing changes)
//	GET    /v1/jobs?status=active|terminated|all   → {jobs: [summary...]} newest first
//	GET    /v1/jobs/{id_or_name}                   the job record, with live metrics while it runs
//	POST   /v1/jobs/{id_or_name}:drain             → the job's summary
//	POST   /v1/jobs/{id_or_name}:cancel            → the job's summary
//	POST   /v1/jobs/{id_or_name}:snapshot          {ttl?, description?, snapshot_sources?} (body optional) → 201 snapshot
//	POST   /v1/jobs/{name}:rollback                {to_generation?, validate_only?, max_stop_duration?, request_id?} → {report..., job} (rollback.go)
//	POST   /v1/jobs/{id_or_name}/options           {options: {num_workers, ...}} → the job's summary (a rescale in flight)
//	POST   /v1/jobs:update                         {submit fields, transform_name_mapping?, allow_source_change?, validate_only?, jinja_variables?}
//	                                               → {report, job, replaced, pause_ms, options, options_changed, notes, graph}; 409 with the same body when refused
//	POST   /v1/jobs:createFromSnapshot             {submit fields, snapshot_id, transform_name_mapping?, allow_source_change?, validate_only?} → 201 {report, job} (200 {report, notes} validate-only)
//	GET    /v1/jobs/{id_or_name}/events[?after=SEQ&limit=N&follow=true]   → {job_id, events: [...]}; follow: server-sent events (events.go)
//	GET    /v1/jobs/{id_or_name}/metrics:history[?from=&to=&step=&metric=&resolution=]   → {job_id, resolution, from, to, series: [...]} (history.go)
//	GET    /v1/history/{name}                      → {name, jobs, attempts, generations}: every job of a name and every refused update
//	POST   /v1/snapshots                           {job_id, ttl?, description?, snapshot_sources?} → 201 snapshot (snapshots.go)
//	GET    /v1/snapshots[?job_id=ID|NAME&all=true] → {snapshots: [snapshot...]} newest first
//	GET    /v1/snapshots/{id}                      → snapshot
//	DELETE /v1/snapshots/{id}                      → the DELETED snapshot
//	GET    /v1/snapshots/{id}:export               → the snapshot's portable file (snapshotfiles.go)
//	POST   /v1/snapshots:import                    {upload_id?, offset, data, final?, ttl?} → {upload_id, received_bytes, snapshot?}
//	POST   /v1/manifests                           {name, partition, files, side_inputs?} → 201 manifest (200 with existed: an identical one existed) (manifests.go)
//	GET    /v1/manifests                           → {manifests: [...]} by name, then partition
//	GET    /v1/manifests/{name}[?partition=P]      → {manifests: [...]} of name; with partition, that manifest
//	POST   /v1/schedules                           {name, pipeline, base_dir, every|cron, files, start?, delay?, partition_template?, side_inputs?, job_name?, options?, max_attempts?, retry_backoff?} → 201 schedule (schedules.go)
//	GET    /v1/schedules                           → {schedules: [...]} by name
//	GET    /v1/schedules/{name}                    → schedule with its versions and runs
//	DELETE /v1/schedules/{name}                    → the deleted schedule (published rows, manifests and jobs stay)
//	POST   /v1/schedules/{name}:switch             {pipeline, base_dir, pipeline_file?, options?, from_partition?} → schedule
//	POST   /v1/schedules/{name}:rollback           (body optional) → schedule
//	POST   /v1/schedules/{name}:pause              (body optional) → schedule
//	POST   /v1/schedules/{name}:resume             (body optional) → schedule
//	POST   /v1/schedules/{name}:retry              {partition} → schedule
//	GET    /v1/broker                              → {id}: the broker's identity, which job snapshots record beside their positions
//	POST   /v1/topics                              {name, retention?} → 201 topic
//	GET    /v1/topics                              → {topics: [topic...]} by name
//	GET    /v1/topics/{name}                       → topic
//	GET    /v1/topics/{name}/messages[?since=T&until=T&after=SEQ&limit=N] → {messages, next_sequence, done}: retained messages by sequence, nothing delivered or acknowledged (retained.go)
//	DELETE /v1/topics/{name}[?force=true]          → 204 (its messages and subscriptions too)
//	POST   /v1/topics/{name}:publish               {messages: [{data, attributes?, id?}]} → {published, duplicates, id_conflicts, results}
//	POST   /v1/subscriptions                       {name, topic, ack_wait?, from_beginning?} → 201 subscription
//	GET    /v1/subscriptions[?topic=T]             → {subscriptions: [subscription...]} by name
//	GET    /v1/subscriptions/{name}                → subscription
//	DELETE /v1/subscriptions/{name}[?force=true]   → 204
//	POST   /v1/subscriptions/{name}:pull           {max?, ack?, force?} → {messages: [...]}
//	POST   /v1/subscriptions/{name}:seek           {snapshot | time, force?} → {subscription, topic, ack_floor, backlog} (subsnapshots.go)
//	POST   /v1/subscription-snapshots              {name, subscription} → 201 subscription snapshot
//	GET    /v1/subscription-snapshots[?topic=T]    → {snapshots: [...]} by name
//	GET    /v1/subscription-snapshots/{name}       → subscription snapshot
//	DELETE /v1/subscription-snapshots/{name}       → 204
//	GET    /v1/tables                              → {tables: [{name, layout, driver, jobs, members: [{table, role, generation, rows}], merges: [last]}]} by name (tables.go)
//	GET    /v1/tables/{name}                       → table with members' columns, the view's rule and the last 20 merges
//	POST   /v1/tables/{name}:merge                 (body optional) → {at, duration_ms, rows, members, principal}: a staged table's merge, now
//	GET    /v1/partitions/{name}                   → {partitions: [{partition, status, target, table, driver, job_id, manifest_digest, output_digest, rows, replaced, published_at, source, target_source}]}: a job name's partition runs (partitions.go)
//	POST   /v1/partitions/{name}:prune             {partition?, statuses?, dry_run?} → {removed: [...as the list's entries], dry_run}: drops the staging tables / removes the version directories of staged and shadow entries
//	POST   /v1/process:release                     {name, graph, program, transform_name_mapping, allow_source_change, validate_only}
//	                                               → {report, replaced, released} (Go programs only: WithRelease)
//	GET    /metrics                                Prometheus text format, per job and per step
//	GET    /healthz                                {"status": "ok"}
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
// It may import service, service/record (the records it converts), runner/contract (the re-read starts a record carries), client (the wire types), compat (the update
// report), plan (a validate-only update's plan), graph (the coders a report names), errcode, manifest
// (the input manifests it converts), mtime (the rate
// limiter's clock), io/pubsub (the broker's types, through the PubSub
// interface), io/sqlsink (a PostgreSQL DSN shown without its secrets), github.com/prometheus/client_golang and the standard library.
// It knows nothing of the executor, the store or YAML, which it reaches
// only through package service.
package api
