package main

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The seeded soak test (issue 12): a real `weir server` child process is
// killed with SIGKILL at random points of a stream, while messages are
// being published through the HTTP API (`weir topics publish`), while an
// in-place update or a rescale is in flight, and while chunks already
// published are published again with the same message IDs. The job reads
// the topic (ReadFromPubSub), sums per key in one-minute windows with an
// accumulating Combine, and upserts the sums into SQLite (WriteToSql). After
// the last kill the job catches up and drains; the table must then equal
// the ground truth computed from the published input, for every (key,
// window): nothing acknowledged lost, nothing counted twice.
//
// WEIR_SOAK_SEED=N replays a run (the seed is printed when a run fails);
// WEIR_SOAK=long runs the long variant (30 kills × 3 runs of 40,000
// messages) instead of the short one (3 kills, 6,000 messages).

const (
	soakSeedEnv = "WEIR_SOAK_SEED"
	soakEnv     = "WEIR_SOAK"
)

// soakSize is one variant of the soak test.
type soakSize struct {
	runs, kills, messages, keys int
}

func TestCLISoak(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts and kills servers")
	}
	size := soakSize{runs: 1, kills: 3, messages: 6000, keys: 7}
	if os.Getenv(soakEnv) == "long" {
		size = soakSize{runs: 3, kills: 30, messages: 40000, keys: 50}
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(soakSeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want an unsigned integer", soakSeedEnv, s)
		}
		seed = v
	}
	for run := 0; run < size.runs; run++ {
		runSeed := seed + uint64(run)
		t.Run(fmt.Sprintf("run%d", run), func(t *testing.T) {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("replay this run with %s=%d", soakSeedEnv, runSeed)
				}
			})
			soakRun(t, runSeed, size)
		})
	}
}

// soakAction is what is in flight when the server is killed.
type soakAction int

const (
	soakNothing soakAction = iota
	soakUpdate             // weir run --update with the other pipeline version
	soakRescale            // weir jobs update-options --num-workers N
)

func (a soakAction) String() string {
	return [...]string{"nothing", "update", "rescale"}[a]
}

func soakRun(t *testing.T, seed uint64, size soakSize) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	dir, work := t.TempDir(), t.TempDir()
	db := filepath.Join(work, "totals.db")
	// Two compatible versions of the pipeline: an update swaps them in
	// place (the source's idle_timeout differs, nothing the state depends
	// on).
	versions := make([]string, 2)
	for v := range versions {
		versions[v] = writeTestFile(t, work, fmt.Sprintf("p%d.yaml", v), totalsPipeline("topic: orders, idle_timeout: "+[]string{"1h", "2h"}[v], "", "", "", db))
	}

	// The input: message i has key k(i mod keys), amount i and an event
	// time 100 ms after message i-1's, so windows span 600 messages; the
	// chunks are written up front, so the ground truth is that of every
	// message.
	in := newCrashInput(t, work, size.keys)
	chunkFile := func(from, to int) string { return in.chunk(from, to, time.Duration(from)*100*time.Millisecond) }
	// One chunk per kill and one after the last: random bounds.
	bounds := []int{0}
	for i := 1; i <= size.kills; i++ {
		share := size.messages / (size.kills + 1)
		bounds = append(bounds, i*share+rng.IntN(share/2+1)-share/4)
	}
	bounds = append(bounds, size.messages)
	chunks := make([]string, len(bounds)-1)
	for i := range chunks {
		chunks[i] = chunkFile(bounds[i], bounds[i+1])
	}

	srv := startServer(t, dir)
	version := 0
	srv.runOrdersJob(t, work, versions[version])

	publish := func(url string, chunk int) cliResult {
		return soakCLI(work, "topics", "publish", "orders", "--file", chunks[chunk], "--id-field", "id", "--server", url)
	}
	var outcomes []string
	for i := range chunks {
		last := i == len(chunks)-1
		if last {
			if r := publish(srv.url, i); r.code != ExitOK {
				t.Fatalf("publish the last chunk: %d %s", r.code, r.stderr)
			}
			break
		}
		// In flight when the kill lands: the publish of chunk i, and
		// maybe an update or a rescale.
		action := soakAction(rng.IntN(3))
		workers := 1 + rng.IntN(3)
		next := 1 - version
		pubDone := make(chan cliResult, 1)
		go func(url string) { pubDone <- publish(url, i) }(srv.url)
		actDone := make(chan cliResult, 1)
		go func(url string) {
			switch action {
			case soakUpdate:
				actDone <- soakCLI(work, "run", versions[next], "--job-name", "orders", "--update", "--server", url)
			case soakRescale:
				actDone <- soakCLI(work, "jobs", "update-options", "orders", "--num-workers", strconv.Itoa(workers), "--server", url)
			default:
				actDone <- cliResult{}
			}
		}(srv.url)
		// Kill at a random point in time: a delay on purpose, since what
		// is under test is that a crash wherever it lands (publishing,
		// reading, checkpointing, committing, swapping executions) loses
		// and duplicates nothing.
		<-time.After(time.Duration(rng.IntN(900)) * time.Millisecond)
		srv.stop(syscall.SIGKILL)
		pub, act := <-pubDone, <-actDone
		if action == soakUpdate && act.code == ExitOK {
			version = next
		}
		outcomes = append(outcomes, fmt.Sprintf("kill %d: publish exit %d, %s exit %d", i+1, pub.code, action, act.code))
		srv = startServer(t, dir)
		srv.waitJob("orders", "RUNNING after the restart", stateIs("RUNNING"))
		if pub.code != ExitOK {
			// The publish was cut off: which of its messages the broker
			// stored is unknown, so publish the chunk again (same IDs).
			if r := publish(srv.url, i); r.code != ExitOK {
				t.Fatalf("publish chunk %d again after the restart: %d %s", i, r.code, r.stderr)
			}
		}
		if i > 0 && rng.IntN(2) == 0 {
			// A client retrying an earlier chunk: the topic's
			// de-duplication window (10 minutes) drops the copies.
			c := rng.IntN(i + 1)
			if r := publish(srv.url, c); r.code != ExitOK {
				t.Fatalf("republish chunk %d: %d %s", c, r.code, r.stderr)
			}
			outcomes[len(outcomes)-1] += fmt.Sprintf(", chunk %d republished", c)
		}
	}
	t.Logf("seed %d: %d messages, %d keys, %d kills\n%s", seed, size.messages, size.keys, size.kills, strings.Join(outcomes, "\n"))
	waitCaughtUp(t, srv, "orders")
	drainAndCheckTotals(t, srv, work, "orders", db, in.want, in.wantN)
	srv.stop(syscall.SIGTERM)
}

// soakCLI runs the CLI like runCLI but is safe in another goroutine: a
// failure to start the process is a result (exit -1), not t.Fatal.
func soakCLI(dir string, args ...string) cliResult {
	exe, err := os.Executable()
	if err != nil {
		return cliResult{stderr: err.Error(), code: -1}
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), runAsCLIEnv+"=1")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		return cliResult{stderr: err.Error(), code: -1}
	}
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}
