package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/api"
	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/server"
	"github.com/weir-dev/weir/service"
)

// Reading a stopped process's records. A Go program (weirx) or a weir
// server keeps its job records in its data directory; once it has exited,
// no server answers for them. `weir jobs list|describe|history|logs
// --data-dir DIR` opens DIR read-only (service.Options.Inspect: no job
// resumes, nothing is written) and answers the command through the same
// API handler a server uses, in memory, so its output is the server's.

// addDataDirFlag declares --data-dir on a command that only reads.
func addDataDirFlag(cmd *cobra.Command, dst *serverFlag) {
	cmd.Flags().StringVar(&dst.DataDir, "data-dir", "", "read the records of this data directory of a stopped weir server or Go program (./JOB_NAME-data for a program) instead of asking a server; nothing in it changes")
}

// openClient returns the client a reading command asks: an in-memory one
// over f.DataDir when it is set, else newClient(f). done releases what it
// opened.
func openClient(ctx context.Context, f serverFlag) (c *client.Client, done func(), err error) {
	if f.DataDir == "" {
		c, err := newClient(f)
		return c, func() {}, err
	}
	if f.Addr != "" {
		return nil, nil, usageErrorf("--data-dir reads a stopped process's data directory and --server asks a running one: give one of them")
	}
	return inspectClient(ctx, f.DataDir)
}

// inspectClient opens dir read-only and returns a client whose requests
// the API handler answers in memory. The data directory's lock is held
// until done, so that no server or program starts on it meanwhile.
func inspectClient(ctx context.Context, dir string) (*client.Client, func(), error) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, nil, withCode(ExitFailure, fmt.Errorf("--data-dir %s: no such directory", dir))
	}
	lock, err := server.ReadLockDataDir(ctx, dir, 30*time.Second)
	if errors.Is(err, server.ErrDataDirLocked) {
		return nil, nil, withCode(ExitFailure, fmt.Errorf("--data-dir %s is in use by a running weir server or Go program: ask it with --server (the program's --listen address) instead", dir))
	}
	if err != nil {
		return nil, nil, withCode(ExitFailure, fmt.Errorf("--data-dir %s: %w", dir, err))
	}
	// The service's own logs (a store it opens read-only) are not the
	// command's output.
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := service.Open(ctx, service.Options{DataDir: dir, Inspect: true, Logger: logger})
	if err != nil {
		_ = lock.Unlock()
		return nil, nil, withCode(ExitFailure, fmt.Errorf("--data-dir %s: %w", filepath.Clean(dir), err))
	}
	h := api.NewServer(svc, logger)
	c, err := client.NewClient("http://data-dir.invalid", &http.Client{Transport: handlerTransport{h}})
	if err != nil {
		_ = svc.Close(ctx)
		_ = lock.Unlock()
		return nil, nil, err
	}
	done := func() {
		h.EndStreams()
		_ = svc.Close(context.WithoutCancel(ctx))
		_ = lock.Unlock()
	}
	return c, done, nil
}

// handlerTransport answers a request with an http.Handler in memory. It
// buffers the whole answer: reads only (an event stream that follows a
// job has nothing to follow in a stopped process's directory).
type handlerTransport struct{ h http.Handler }

// RoundTrip implements http.RoundTripper.
func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	res := rec.Result()
	res.Request = r
	return res, nil
}
