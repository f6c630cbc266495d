// Package server assembles one weir process: it takes the data directory's
// lock, listens for the HTTP API, starts the Pub/Sub broker (embedded under
// DATA_DIR/broker, or an external NATS server), opens the job service,
// serves the API, publishes the process's address in DATA_DIR/process.json,
// waits for SIGTERM or SIGINT (or, for a Go program, for a new build that
// asks it to release the data directory) and shuts everything down with a
// checkpoint of every job. `weir server` and Go programs (package weirx)
// are both built from it.
//
// It puts the API behind an api.Guard: a listen address beyond loopback
// needs a token file (Config.AuthTokenFile, or GenerateAuthToken's
// DATA_DIR/auth-token), or Open fails with ErrAuthRequired. The data
// directory is made private (0700, files 0600) at every start. Its
// listeners (the API's, the Pub/Sub gRPC API's) count their connections
// and close those past Config.MaxConnections or
// Config.MaxConnectionsPerAddress at once, the total cap kept below the
// process's descriptor limit (conns.go). See docs/SECURITY.md.
//
// It serves the web console (package console) beside the API, its pages
// behind a guard of their own that asks no token, and Google's Pub/Sub v1
// gRPC API (io/pubsub/pubsubgrpc) on Config.PubSubGRPCListen, behind the
// same tokens.
//
// It may import service, api, client (the wire type of the cluster's
// members), cluster (a member's lease and log: cluster.go), state (a
// follower's replica), console, io/pubsub, io/pubsub/pubsubgrpc,
// io/pubsub/pubsubrest (Pub/Sub's REST surface under /v1/projects/),
// runner/contract (for the dead-letter hook), errcode, yamlpipe (what submitted pipelines may
// touch), github.com/prometheus/client_golang (a cluster's metrics) and
// the standard library. It knows nothing of the command line,
// and must not import cmd/weir or weirx.
package server
