package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/cmd/weir/internal/serverconn"
)

// serverEnv names the environment variable that points the CLI at a weir
// server (package serverconn's).
const serverEnv = serverconn.ServerEnv

// serverFlag is what a command that talks to a server reads from its
// flags (package serverconn's Flag).
type serverFlag = serverconn.Flag

// addServerFlag declares --server, --token, --token-file and --tls-ca on cmd.
func addServerFlag(cmd *cobra.Command, dst *serverFlag) { serverconn.AddFlag(cmd, dst) }

// newClient returns an API client of the server f designates, sending
// its token.
func newClient(f serverFlag) (*client.Client, error) { return serverconn.NewClient(f) }

// clientError maps an API client error to the CLI's exit codes.
func clientError(ctx context.Context, c *client.Client, err error) error {
	return serverconn.Error(ctx, c, err)
}
