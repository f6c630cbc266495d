package rehearsecmd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/sandbox"
)

// TestTraceBudget: --trace-memory takes byte sizes in decimal and binary
// units; a size that does not parse, a negative one or 0, and a
// --trace-dir that does not exist or is a file are usage errors naming
// the flag and its value.
func TestTraceBudget(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		mem, dir string
		wantMem  int64
		wantErr  string
	}{
		{mem: "", wantMem: 0},
		{mem: "64MiB", wantMem: 64 << 20},
		{mem: "1GiB", wantMem: 1 << 30},
		{mem: "512MB", wantMem: 512e6},
		{mem: "1048576", wantMem: 1 << 20},
		{mem: "1MiB", dir: dir, wantMem: 1 << 20},
		{mem: "lots", wantErr: `--m "lots": not a size: "lots" (want a byte size such as 64MiB, 1GiB or 512MB)`},
		{mem: "1.5GiB", wantErr: `--m "1.5GiB": not a size`},
		{mem: "-1MiB", wantErr: `--m "-1MiB": the budget must not be negative`},
		{mem: "0", wantErr: `--m "0": the budget must be more than 0 bytes (the default is 256.0 MiB)`},
		{dir: missing, wantErr: `--d "` + missing + `": directory ` + missing + ` does not exist`},
		{dir: file, wantErr: `--d "` + file + `": ` + file + ` is not a directory`},
	}
	for _, tt := range tests {
		mem, spill, err := TraceBudget("--m", tt.mem, "--d", tt.dir)
		if tt.wantErr == "" {
			if err != nil || mem != tt.wantMem || spill != tt.dir {
				t.Errorf("TraceBudget(%q, %q) = %d, %q, %v; want %d, %q", tt.mem, tt.dir, mem, spill, err, tt.wantMem, tt.dir)
			}
			continue
		}
		var ee *cli.ExitError
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.As(err, &ee) || ee.Code != cli.ExitUsage {
			t.Errorf("TraceBudget(%q, %q) = %v; want a usage error naming %q", tt.mem, tt.dir, err, tt.wantErr)
		}
	}
}

// TestTraceReport: the report gives the budget and the spill directory
// that applied, the defaults spelled out.
func TestTraceReport(t *testing.T) {
	tr := &sandbox.Trace{}
	defer tr.Close()
	if err := tr.AppendEvents(strings.NewReader(`{"element": {"amount": 1}, "event_time": 0}`+"\n"), "e.jsonl"); err != nil {
		t.Fatal(err)
	}
	got := traceReport(tr)
	if got.Elements != 1 || got.Bytes == 0 || got.SpilledBytes != 0 || got.MemoryBudgetBytes != sandbox.DefaultTraceMemory || got.SpillDir != os.TempDir() {
		t.Errorf("the report of a default trace: %+v", got)
	}
	dir := t.TempDir()
	tr2 := &sandbox.Trace{MaxMemory: 64 << 20, SpillDir: dir}
	defer tr2.Close()
	if got := traceReport(tr2); got.MemoryBudgetBytes != 64<<20 || got.SpillDir != dir {
		t.Errorf("the report of a trace with its budget set: %+v", got)
	}
}
