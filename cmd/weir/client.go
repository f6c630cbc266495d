package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/api"
	"github.com/weir-dev/weir/service"
)

// serverEnv names the environment variable that points the CLI at a weir
// server (and makes `weir run` submit to it).
const serverEnv = "WEIR_SERVER"

// addServerFlag declares --server on cmd.
func addServerFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVar(dst, "server", "", "address of the weir server (default $"+serverEnv+", else "+api.DefaultServer+")")
}

// serverAddr returns the server address: the flag, $WEIR_SERVER, or the default.
func serverAddr(flag string) string {
	if flag != "" {
		return flag
	}
	if v := os.Getenv(serverEnv); v != "" {
		return v
	}
	return api.DefaultServer
}

// newClient returns an API client of the server flag designates.
func newClient(flag string) (*api.Client, error) {
	c, err := api.NewClient(serverAddr(flag), nil)
	if err != nil {
		return nil, usageErrorf("--server: %w", err)
	}
	return c, nil
}

// clientError maps an API client error to the CLI's exit codes: an
// unreachable server, an invalid pipeline, a usage problem (bad name or
// options), or a failure (unknown job, illegal transition).
func clientError(ctx context.Context, c *api.Client, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return err
	}
	if errors.Is(err, api.ErrUnreachable) {
		return withCode(ExitServerUnreachable, fmt.Errorf("no weir server answers at %s: start one with 'weir server' (from a checkout: go run ./cmd/weir server), or point --server or $%s at a running one", c.Base(), serverEnv))
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		return withCode(exitCodeOf(ae.Code), fmt.Errorf("%s (%s)", ae.Message, ae.Code))
	}
	return withCode(ExitFailure, err)
}

// exitCodeOf maps an API error code to the CLI's exit code through the
// code's kind in the registry (package errcode): an invalid pipeline exits
// ExitInvalidPipeline, any other invalid request (a bad job, topic or
// subscription name, option, filter, setting or mapping) ExitUsage, the
// rest (unknown job, illegal transition, internal) ExitFailure. A route
// without the method (METHOD_NOT_ALLOWED) is the CLI's fault, not the
// user's: a failure.
func exitCodeOf(c service.Code) int {
	switch {
	case c == service.CodeInvalidPipeline:
		return ExitInvalidPipeline
	case c.Kind() == service.KindInvalid && c != service.CodeMethodNotAllowed:
		return ExitUsage
	}
	return ExitFailure
}
