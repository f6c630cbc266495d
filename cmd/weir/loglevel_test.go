package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServerLogsAtInfoByDefault: `weir server` without --log-level logs
// at info (its start, jobs' starts and ends, shutdown), while the other
// commands keep warn. The SIGTERM it gets right after printing its address
// stops it cleanly (exit 0): signals are caught from the start, not only
// once it waits for them.
func TestServerLogsAtInfoByDefault(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "server", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), runAsCLIEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		for sc.Scan() {
		}
	}()
	select {
	case line := <-first:
		if !strings.HasPrefix(line, "weir server listening on ") {
			t.Fatalf("first line %q", line)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the server did not start within 30s")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("server exit: %v\n%s", err, stderr.String())
	}
	if log := stderr.String(); !strings.Contains(log, "level=INFO") || !strings.Contains(log, "weir process serving") {
		t.Errorf("server log without --log-level has no info lines:\n%s", log)
	}
	if r := runCLI(t, "", "version"); strings.Contains(r.stderr, "level=INFO") {
		t.Errorf("weir version logged at info: %s", r.stderr)
	}
}
