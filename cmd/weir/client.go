package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/errcode"
)

// serverEnv names the environment variable that points the CLI at a weir
// server (where `weir run --job-name` submits, not whether `weir run`
// does); tokenEnv the one that holds the server's bearer token.
const (
	serverEnv = "WEIR_SERVER"
	tokenEnv  = client.TokenEnv
)

// serverFlag is what a command that talks to a server reads from its flags:
// the address (--server) and the bearer token (--token, --token-file).
type serverFlag struct {
	addr      string
	token     string
	tokenFile string
	tlsCA     string
	// dataDir, on reading commands only (addDataDirFlag), reads a stopped
	// process's data directory instead of asking a server (inspect.go).
	dataDir string
}

// addServerFlag declares --server, --token and --token-file on cmd.
func addServerFlag(cmd *cobra.Command, dst *serverFlag) {
	fl := cmd.Flags()
	fl.StringVar(&dst.addr, "server", "", "address of the weir server (default $"+serverEnv+", else "+client.DefaultServer+")")
	fl.StringVar(&dst.token, "token", "", "bearer token of the weir server (visible to other local users in the process list: prefer --token-file or $"+tokenEnv+")")
	fl.StringVar(&dst.tokenFile, "token-file", "", "file holding the weir server's bearer token (default $"+tokenEnv+")")
	fl.StringVar(&dst.tlsCA, "tls-ca", "", "PEM file of the CA that signed an https server's certificate (default $"+client.TLSCAEnv+", else the system's roots)")
}

// serverAddr returns the server address: the flag, $WEIR_SERVER, or the default.
func serverAddr(flag string) string {
	if flag != "" {
		return flag
	}
	if v := os.Getenv(serverEnv); v != "" {
		return v
	}
	return client.DefaultServer
}

// clientToken returns the bearer token to send: --token, else the first
// token of --token-file, else $WEIR_TOKEN; "" sends none (a loopback
// server without a token file).
func clientToken(f serverFlag) (string, error) {
	tok, _, err := client.ClientToken(f.token, f.tokenFile)
	if err != nil {
		return "", usageErrorf("%w", err)
	}
	return tok, nil
}

// newClient returns an API client of the server f designates, sending
// its token.
func newClient(f serverFlag) (*client.Client, error) {
	hc, err := client.NewHTTPClient(client.ClientCAFile(f.tlsCA), 30*time.Second)
	if err != nil {
		return nil, usageErrorf("--tls-ca: %w", err)
	}
	c, err := client.NewClient(serverAddr(f.addr), hc)
	if err != nil {
		return nil, usageErrorf("--server: %w", err)
	}
	tok, err := clientToken(f)
	if err != nil {
		return nil, err
	}
	return c.WithToken(tok), nil
}

// clientError maps an API client error to the CLI's exit codes: an
// unreachable server, an invalid pipeline, a usage problem (bad name or
// options), or a failure (unknown job, illegal transition).
func clientError(ctx context.Context, c *client.Client, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return err
	}
	if errors.Is(err, client.ErrTLS) {
		return withCode(ExitServerUnreachable, err)
	}
	if errors.Is(err, client.ErrUnreachable) {
		return withCode(ExitServerUnreachable, fmt.Errorf("no weir server answers at %s: start one with 'weir server' (from a checkout: go run ./cmd/weir server), or point --server or $%s at a running one; the records of a server or Go program that has stopped are read with --data-dir DIR", c.Base(), serverEnv))
	}
	var ae *client.Error
	if errors.As(err, &ae) {
		return &exitError{Code: exitCodeOf(ae.Code), Err: fmt.Errorf("%s (%s)", ae.Message, ae.Code), ByServer: true}
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
func exitCodeOf(c errcode.Code) int {
	switch {
	case c == errcode.InvalidPipeline, c == errcode.PathNotAllowed, c == errcode.SQLHostNotAllowed, c == errcode.SQLIdentifierTooLong:
		return ExitInvalidPipeline
	case c.Kind() == errcode.KindInvalid && c != errcode.MethodNotAllowed:
		return ExitUsage
	}
	return ExitFailure
}
