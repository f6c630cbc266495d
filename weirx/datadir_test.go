package weirx_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/server"
	"github.com/weir-dev/weir/weirx"
)

// TestProgramDataDir: a program started without --data-dir keeps its job
// in ./JOB_NAME-data, not in a weir server's ./weir-data; and a program
// pointed at a directory a weir server holds is refused with a hint that
// fits (its own --data-dir, not --update, which cannot take a server's
// directory over), with and without --update.
func TestProgramDataDir(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs programs")
	}
	dir := t.TempDir()
	exe := buildCounts(t, "v1")

	// A weir server's data directory: its lock held, its control file
	// saying a server owns it.
	srvDir := filepath.Join(dir, "weir-data")
	if err := os.MkdirAll(srvDir, 0o700); err != nil {
		t.Fatal(err)
	}
	lock, err := server.LockDataDir(context.Background(), srvDir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	ctl, _ := json.Marshal(server.ControlFile{PID: os.Getpid(), Address: "http://127.0.0.1:1", Kind: server.KindServer, StartTime: time.Now()})
	if err := os.WriteFile(filepath.Join(srvDir, server.ControlFileName), ctl, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{nil, {"--update"}} {
		code, _, stderr := runProgram(t, exe, append([]string{"--job-name", "counts", "--data-dir", srvDir}, extra...)...)
		if code != weirx.ExitFailure || !strings.Contains(stderr, "give this program its own --data-dir") || strings.Contains(stderr, "start this build with --update") {
			t.Errorf("args %v on a server's directory: exit %d\n%s", extra, code, stderr)
		}
	}

	// Without --data-dir: ./counts-data in the working directory.
	wd := t.TempDir()
	p := startProgramIn(t, wd, exe, "--job-name", "counts")
	if _, err := os.Stat(filepath.Join(wd, "counts-data", server.ControlFileName)); err != nil {
		t.Errorf("the program's default data directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(wd, "weir-data")); !os.IsNotExist(err) {
		t.Errorf("the program created ./weir-data: %v", err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the program did not stop on SIGTERM")
	}
}
