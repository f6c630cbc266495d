// Package serverconn is how a weir CLI command reaches a weir server: the
// --server, --token, --token-file and --tls-ca flags, the API client they
// designate, and the mapping of the client's errors to the CLI's exit codes
// (an unreachable server, an invalid pipeline, a usage problem, a failure),
// shared by package main and the command packages under cmd/weir/internal.
//
// It may import client, cmd/weir/internal/cli, errcode,
// github.com/spf13/cobra and the standard library; only the weir CLI's own
// packages (cmd/weir and cmd/weir/internal/...) import it.
package serverconn
