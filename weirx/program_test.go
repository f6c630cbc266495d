package weirx_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"

	_ "modernc.org/sqlite"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/state"
	"github.com/weir-dev/weir/weirx"
)

// countsBuilds are the builds of examples/sdk-counts this test binary
// made, one per graph variant: every test of a variant runs the same
// executable (a build is a link of the whole service, seconds of CPU, and
// twelve of them were a fifth of the package's time). The executables
// live in dir, which TestMain removes.
type countsBuilds struct {
	dir string
	// mu guards exes; a leaf. A build runs under it, so a variant is
	// built once even when two tests ask at the same time.
	mu   sync.Mutex
	exes map[string]string
}

// builds is this test binary's countsBuilds, made by TestMain.
var builds *countsBuilds

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "weirx-builds-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	builds = &countsBuilds{dir: dir, exes: map[string]string{}}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// buildCounts returns examples/sdk-counts built with the given graph
// variant (built at its first use). A program's data directory is its
// flag's or the working directory's, never the executable's, so tests
// can share it.
func buildCounts(t *testing.T, variant string) string {
	t.Helper()
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if exe, ok := builds.exes[variant]; ok {
		return exe
	}
	out := filepath.Join(builds.dir, "sdk-counts-"+variant)
	cmd := exec.Command("go", "build", "-ldflags", "-X main.variant="+variant, "-o", out, "./examples/sdk-counts")
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building sdk-counts %s: %v\n%s", variant, err, b)
	}
	builds.exes[variant] = out
	return out
}

// proc is a running program (a child process).
type proc struct {
	t       *testing.T
	cmd     *exec.Cmd
	addr    string
	lines   []string // stdout after the address line
	logPath string
	mu      sync.Mutex
	done    chan int
}

// startProgram starts exe with args and waits for its address line.
func startProgram(t *testing.T, exe string, args ...string) *proc {
	t.Helper()
	return startProgramIn(t, "", exe, args...)
}

// startProgramIn is startProgram in the working directory wd ("" the
// test's).
func startProgramIn(t *testing.T, wd, exe string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "program.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, append(args, "--checkpoint-interval", "100ms", "--log-level", "info")...)
	cmd.Dir = wd
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	p := &proc{t: t, cmd: cmd, logPath: logPath, done: make(chan int, 1)}
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
		err := cmd.Wait()
		logf.Close()
		p.done <- exitCodeOf(err)
	}()
	select {
	case line, ok := <-first:
		const marker = " listening on "
		_, rest, found := strings.Cut(line, marker)
		if !ok || !found {
			t.Fatalf("%s printed %q, want a first line with %q\nlog:\n%s", filepath.Base(exe), line, marker, p.log())
		}
		p.addr, _, _ = strings.Cut(rest, " ")
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("%s did not start\nlog:\n%s", filepath.Base(exe), p.log())
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func exitCodeOf(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ee.ExitCode() == -1 {
			return 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func (p *proc) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait() int {
	p.t.Helper()
	select {
	case code := <-p.done:
		return code
	case <-time.After(3 * time.Minute):
		_ = p.cmd.Process.Kill()
		p.t.Fatalf("%s did not exit\nlog:\n%s", p.cmd.Path, p.log())
		return -1
	}
}

// signal sends sig and returns the exit code.
func (p *proc) signal(sig syscall.Signal) int {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signalling %s: %v", p.cmd.Path, err)
	}
	return p.wait()
}

func (p *proc) client() *client.Client {
	p.t.Helper()
	c, err := client.NewClient(p.addr, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

// waitEpoch waits until the job ref has a checkpoint past epoch and
// returns it: data flows and is checkpointed.
func (p *proc) waitEpoch(ref string, past uint64) *client.Job {
	p.t.Helper()
	ctx := context.Background()
	var j *client.Job
	if await.Until(time.Minute, 50*time.Millisecond, func() bool {
		got, err := p.client().Get(ctx, ref)
		if err == nil && got.LastCheckpoint != nil && got.LastCheckpoint.Epoch > past {
			j = got
		}
		return j != nil
	}) {
		return j
	}
	p.t.Fatalf("job %s took no checkpoint past epoch %d\nlog:\n%s", ref, past, p.log())
	return nil
}

// runProgram runs exe to completion and returns its exit code and output.
func runProgram(t *testing.T, exe string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(exe, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return exitCodeOf(err), stdout.String(), stderr.String()
}

// TestProgramUpdate runs examples/sdk-counts as real processes through a
// sequence of starts on one data directory and checks, at the end, that
// the per-key counts equal exactly what the source generated: nothing lost
// or counted twice across an update from a running process, a refused
// update, a restart after SIGTERM, a crash (SIGKILL) and an update after
// the crash.
func TestProgramUpdate(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs programs")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build the example")
	}
	v1, v2, v3 := buildCounts(t, "v1"), buildCounts(t, "v2"), buildCounts(t, "v3")
	dir := t.TempDir()
	args := []string{"--job-name", "counts", "--data-dir", dir}
	ctx := context.Background()

	// v1 starts a new job.
	p1 := startProgram(t, v1, args...)
	j1 := p1.waitEpoch("counts", 2)
	if j1.Generation != 1 || j1.SDK != record.SDKGo || j1.State != client.StateRunning {
		t.Fatalf("v1's job: generation %d, sdk %q, state %s; want 1, go, RUNNING", j1.Generation, j1.SDK, j1.State)
	}

	// v2 without --update while v1 runs: refused, naming the process.
	code, _, stderr := runProgram(t, v2, args...)
	if code != weirx.ExitFailure || !strings.Contains(stderr, "in use by") || !strings.Contains(stderr, "--update") {
		t.Fatalf("v2 without --update: exit %d, stderr %q; want %d naming the running process and --update", code, stderr, weirx.ExitFailure)
	}

	// v3 changes CountPerKey's key: the running process refuses, keeps running.
	code, stdout, stderr := runProgram(t, v3, append(args, "--update")...)
	if code != weirx.ExitIncompatible || !strings.Contains(stdout, "KEY_CODER_CHANGED") || !strings.Contains(stdout, "CountPerKey") {
		t.Fatalf("v3 --update: exit %d\nstdout:\n%s\nstderr:\n%s\nwant %d with a KEY_CODER_CHANGED report", code, stdout, stderr, weirx.ExitIncompatible)
	}
	after := p1.waitEpoch("counts", j1.LastCheckpoint.Epoch+2)
	if after.ID != j1.ID || after.State != client.StateRunning {
		t.Fatalf("after the refused update the job is %s %s, want %s RUNNING", after.ID, after.State, j1.ID)
	}

	// v3 --update --validate-only: the report, exit 6, nothing changes.
	if code, stdout, _ := runProgram(t, v3, append(args, "--update", "--validate-only")...); code != weirx.ExitIncompatible || !strings.Contains(stdout, "KEY_CODER_CHANGED") {
		t.Fatalf("v3 --update --validate-only: exit %d\n%s", code, stdout)
	}
	// v2 --update --validate-only: compatible, exit 0, nothing changes.
	if code, stdout, stderr := runProgram(t, v2, append(args, "--update", "--validate-only")...); code != weirx.ExitOK || !strings.Contains(stdout, "compatible") {
		t.Fatalf("v2 --update --validate-only: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	// v2 --update takes over: v1 checkpoints, releases and exits 0; v2
	// continues the job name with generation 2.
	p2 := startProgram(t, v2, append(args, "--update")...)
	if code := p1.wait(); code != weirx.ExitOK {
		t.Fatalf("v1 exit code after the release = %d, want 0\nlog:\n%s", code, p1.log())
	}
	j2 := p2.waitEpoch("counts", 0)
	if j2.Generation != 2 || j2.ReplacesJobID != j1.ID || j2.ID == j1.ID {
		t.Fatalf("v2's job: %s generation %d replaces %q; want generation 2 replacing %s", j2.ID, j2.Generation, j2.ReplacesJobID, j1.ID)
	}
	if !strings.Contains(p2.output(), "replaced job "+j1.ID) {
		t.Errorf("v2's output lacks %q:\n%s", "replaced job "+j1.ID, p2.output())
	}
	hist, err := p2.client().History(ctx, "counts")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist.Jobs) != 2 || hist.Jobs[0].ID != j1.ID || hist.Jobs[0].State != client.StateUpdated ||
		hist.Jobs[0].ReplacedByJobID != j2.ID || hist.Jobs[1].ReplacesJobID != j1.ID {
		t.Fatalf("history after the update: %+v", hist.Jobs)
	}
	if len(hist.Attempts) != 3 || hist.Attempts[0].Report.Compatible || !hist.Attempts[2].ValidateOnly {
		t.Fatalf("history attempts: want the refused v3, the validate-only v3 and v2; got %+v", hist.Attempts)
	}

	// A plain restart of v2 after SIGTERM resumes the same job.
	p2.waitEpoch("counts", j2.LastCheckpoint.Epoch+2)
	if code := p2.signal(syscall.SIGTERM); code != weirx.ExitOK {
		t.Fatalf("v2 exit code on SIGTERM = %d\nlog:\n%s", code, p2.log())
	}
	p2 = startProgram(t, v2, args...)
	// The program prints what it started after its address line, which the
	// test may not have read yet when the API already answers.
	resumed := await.Until(time.Minute, 10*time.Millisecond, func() bool { return strings.Contains(p2.output(), "resumed") })
	if j := p2.waitEpoch("counts", 0); j.ID != j2.ID || !resumed {
		t.Fatalf("v2 restarted: job %s, output %q; want %s resumed", j.ID, p2.output(), j2.ID)
	}

	// A crash, then v1 with --update: the stored swap from a dead process
	// (generation 3, Valid removed).
	j := p2.waitEpoch("counts", j2.LastCheckpoint.Epoch+3)
	if code := p2.signal(syscall.SIGKILL); code != 128+int(syscall.SIGKILL) {
		t.Fatalf("v2 exit code on SIGKILL = %d", code)
	}
	p3 := startProgram(t, v1, append(args, "--update")...)
	j3 := p3.waitEpoch("counts", j.LastCheckpoint.Epoch)
	if j3.Generation != 3 || j3.ReplacesJobID != j2.ID {
		t.Fatalf("after the crash and update: job %s generation %d replaces %q; want generation 3 replacing %s", j3.ID, j3.Generation, j3.ReplacesJobID, j2.ID)
	}
	p3.waitEpoch("counts", j3.LastCheckpoint.Epoch+2)

	// Drain: the program exits 0 once the job is DRAINED.
	if _, err := p3.client().Drain(ctx, "counts"); err != nil {
		t.Fatal(err)
	}
	if code := p3.wait(); code != weirx.ExitOK {
		t.Fatalf("v1 exit code after the drain = %d\nlog:\n%s", code, p3.log())
	}
	if !strings.Contains(p3.output(), "ended DRAINED") {
		t.Errorf("output after the drain lacks %q:\n%s", "ended DRAINED", p3.output())
	}
	checkCounts(t, dir, []string{j1.ID, j2.ID, j3.ID})
}

// checkCounts compares the counts table with what the source generated
// before the last job's final position (element i has key k<i mod 7>),
// after checking that every job of jobs (oldest first) read elements.
func checkCounts(t *testing.T, dir string, jobs []string) {
	t.Helper()
	st, err := state.Open(filepath.Join(dir, "state"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var n int64
	for i, id := range jobs {
		rec, err := st.LastCheckpoint(id)
		if err != nil {
			t.Fatal(err)
		}
		pos := rec.Positions["Events"]
		if len(pos) != 1 || len(pos[0]) != 8 {
			t.Fatalf("final positions of Events in job %s: %v", id, pos)
		}
		next := int64(binary.BigEndian.Uint64(pos[0]))
		if next <= n {
			t.Errorf("job %d (%s) ended at position %d, not past its predecessor's %d: it read nothing", i+1, id, next, n)
		}
		n = next
	}
	generation := int64(len(jobs))
	want := map[string]int64{}
	for i := range int64(7) {
		if c := (n - i + 6) / 7; c > 0 {
			want[fmt.Sprintf("k%d", i)] = c
		}
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "weir-sql.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT key, n, generation FROM counts")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int64{}
	var sum int64
	for rows.Next() {
		var k string
		var c, g int64
		if err := rows.Scan(&k, &c, &g); err != nil {
			t.Fatal(err)
		}
		got[k] = c
		sum += c
		if g != generation {
			t.Errorf("key %s: generation %d, want %d", k, g, generation)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if sum != n || len(got) != len(want) {
		t.Errorf("counts sum to %d over %d keys; the source generated %d elements over %d keys", sum, len(got), n, len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("key %s: count %d, want %d", k, got[k], w)
		}
	}
	t.Logf("%d elements over 3 generations; counts %v", n, got)
}
