package serverconn

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/errcode"
)

// ServerEnv names the environment variable that points the CLI at a weir
// server (where `weir run --job-name` submits, not whether `weir run`
// does); TokenEnv the one that holds the server's bearer token.
const (
	ServerEnv = "WEIR_SERVER"
	TokenEnv  = client.TokenEnv
)

// Flag is what a command that talks to a server reads from its flags:
// the address (--server) and the bearer token (--token, --token-file).
type Flag struct {
	// Addr is --server.
	Addr string
	// Token is --token.
	Token string
	// TokenFile is --token-file.
	TokenFile string
	// TLSCA is --tls-ca.
	TLSCA string
	// DataDir, on reading commands only (package main's addDataDirFlag),
	// reads a stopped process's data directory instead of asking a server.
	DataDir string
}

// AddFlag declares --server, --token, --token-file and --tls-ca on cmd.
func AddFlag(cmd *cobra.Command, dst *Flag) {
	fl := cmd.Flags()
	fl.StringVar(&dst.Addr, "server", "", "address of the weir server (default $"+ServerEnv+", else "+client.DefaultServer+")")
	fl.StringVar(&dst.Token, "token", "", "bearer token of the weir server (visible to other local users in the process list: prefer --token-file or $"+TokenEnv+")")
	fl.StringVar(&dst.TokenFile, "token-file", "", "file holding the weir server's bearer token (default $"+TokenEnv+")")
	fl.StringVar(&dst.TLSCA, "tls-ca", "", "PEM file of the CA that signed an https server's certificate (default $"+client.TLSCAEnv+", else the system's roots)")
}

// serverAddr returns the server address: the flag, $WEIR_SERVER, or the default.
func serverAddr(flag string) string {
	if flag != "" {
		return flag
	}
	if v := os.Getenv(ServerEnv); v != "" {
		return v
	}
	return client.DefaultServer
}

// clientToken returns the bearer token to send: --token, else the first
// token of --token-file, else $WEIR_TOKEN; "" sends none (a loopback
// server without a token file).
func clientToken(f Flag) (string, error) {
	tok, _, err := client.ClientToken(f.Token, f.TokenFile)
	if err != nil {
		return "", cli.UsageErrorf("%w", err)
	}
	return tok, nil
}

// NewClient returns an API client of the server f designates, sending
// its token.
func NewClient(f Flag) (*client.Client, error) {
	hc, err := client.NewHTTPClient(client.ClientCAFile(f.TLSCA), 30*time.Second)
	if err != nil {
		return nil, cli.UsageErrorf("--tls-ca: %w", err)
	}
	c, err := client.NewClient(serverAddr(f.Addr), hc)
	if err != nil {
		return nil, cli.UsageErrorf("--server: %w", err)
	}
	tok, err := clientToken(f)
	if err != nil {
		return nil, err
	}
	return c.WithToken(tok), nil
}

// Error maps an API client error to the CLI's exit codes: an
// unreachable server, an invalid pipeline, a usage problem (bad name or
// options), or a failure (unknown job, illegal transition).
func Error(ctx context.Context, c *client.Client, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return err
	}
	if errors.Is(err, client.ErrTLS) {
		return cli.WithCode(cli.ExitServerUnreachable, err)
	}
	if errors.Is(err, client.ErrUnreachable) {
		return cli.WithCode(cli.ExitServerUnreachable, fmt.Errorf("no weir server answers at %s: start one with 'weir server' (from a checkout: go run ./cmd/weir server), or point --server or $%s at a running one; the records of a server or Go program that has stopped are read with --data-dir DIR", c.Base(), ServerEnv))
	}
	var ae *client.Error
	if errors.As(err, &ae) {
		return &cli.ExitError{Code: exitCodeOf(ae.Code), Err: fmt.Errorf("%s (%s)", ae.Message, ae.Code), ByServer: true}
	}
	return cli.WithCode(cli.ExitFailure, err)
}

// exitCodeOf maps an API error code to the CLI's exit code through the
// code's kind in the registry (package errcode): an invalid pipeline exits
// cli.ExitInvalidPipeline, any other invalid request (a bad job, topic or
// subscription name, option, filter, setting or mapping) cli.ExitUsage, the
// rest (unknown job, illegal transition, internal) cli.ExitFailure. A route
// without the method (METHOD_NOT_ALLOWED) is the CLI's fault, not the
// user's: a failure.
func exitCodeOf(c errcode.Code) int {
	switch {
	case c == errcode.InvalidPipeline, c == errcode.PathNotAllowed, c == errcode.SQLHostNotAllowed, c == errcode.SQLIdentifierTooLong:
		return cli.ExitInvalidPipeline
	case c.Kind() == errcode.KindInvalid && c != errcode.MethodNotAllowed:
		return cli.ExitUsage
	}
	return cli.ExitFailure
}
