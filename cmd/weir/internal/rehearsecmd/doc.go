// Package rehearsecmd is the weir CLI's `weir rehearse` command: it runs
// the old and the new version of a pipeline over the same recorded input
// (an events file, what the old pipeline's topics retain, a subscription
// snapshot's backlog, or from a job snapshot's state), each in package
// sandbox, and compares their outputs with package diff's comparer; the
// exit code is a CI gate's verdict.
//
// It may import weir (the SDK root package), client, cmd/weir/internal/cli,
// cmd/weir/internal/serverconn, compat, diff, duration, graph, io/pubsub,
// sandbox, service, service/record, github.com/spf13/cobra and the
// standard library; only package main (cmd/weir) imports it.
package rehearsecmd
