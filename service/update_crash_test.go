package service

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"
)

// copyDataDir copies the data directory of s to dst as a crash would leave
// it: in a Tx, which every store write takes, so no write is half copied.
func copyDataDir(t *testing.T, s *Service, dst string) {
	t.Helper()
	_ = s.core.Update(func(tx *Tx) error {
		copyDataDirTx(t, tx, s, dst)
		return nil
	})
}

// copyDataDirTx is copyDataDir within tx.
func copyDataDirTx(t *testing.T, _ *Tx, s *Service, dst string) {
	t.Helper()
	err := filepath.Walk(s.DataDir(), func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(s.DataDir(), path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !info.Mode().IsRegular() || info.Name() == "LOCK" {
			return nil
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Errorf("copying the data directory: %v", err)
	}
}

// TestUpdateCrashAtPhase stops an in-place update after each of its phases,
// takes the data directory as a SIGKILL there would leave it, lets a second
// service recover from that copy, and checks that the name's one active job
// finishes with exactly the table a run without update or crash writes. The
// first service stays blocked in the phase meanwhile (it writes nothing:
// the update holds both executions' checkpoints), as a killed process does.
func TestUpdateCrashAtPhase(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs ten services")
	}
	for _, phase := range []string{"paused", "handed-over", "persisted", "cut", "finished"} {
		t.Run(phase, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			want := oracle(t, dir)
			db := filepath.Join(dir, "job.sqlite")
			crashed := filepath.Join(dir, "crashed")
			copied, release := make(chan struct{}), make(chan struct{})
			var s1 *Service
			at := func(p string) {
				if p != phase {
					return
				}
				copyDataDir(t, s1, crashed)
				close(copied)
				<-release
			}
			s1 = openServiceHooks(t, filepath.Join(dir, "data"), Hooks{
				Paused:      func(string) { at("paused") },
				UpdatePhase: func(_, p string) { at(p) },
			})
			t.Cleanup(func() { close(release) }) // before s1 closes
			old := submit(t, s1, "totals", updatePipeline(db, false, "Sums", ""), dir)
			waitElements(t, s1, old.ID, "Events", 1500)
			go s1.Update(context.Background(), UpdateRequest{ //nolint:errcheck // the first service "crashed"
				SubmitRequest: SubmitRequest{Name: "totals", Pipeline: updatePipeline(db, true, "Sums", ""), BaseDir: dir}})
			<-copied

			recoveredExactly(t, openService(t, crashed), db, want)
		})
	}
}

// TestUpdateCrashAnytimeStress is TestUpdateCrashAtPhase with the crash at
// a random moment of the update (WEIR_CRASH_ROUNDS rounds): the store is
// frozen (Service.mu held) once copied, so that the first service writes
// nothing the copy does not hold.
func TestUpdateCrashAnytimeStress(t *testing.T) {
	t.Parallel()
	rounds, _ := strconv.Atoi(os.Getenv("WEIR_CRASH_ROUNDS"))
	if rounds == 0 {
		t.Skip("WEIR_CRASH_ROUNDS not set")
	}
	for r := range rounds {
		delay := time.Duration(rand.IntN(400)) * time.Millisecond
		t.Run(fmt.Sprintf("round-%d-%s", r, delay), func(t *testing.T) {
			dir := t.TempDir()
			want := oracle(t, dir)
			db := filepath.Join(dir, "job.sqlite")
			crashed := filepath.Join(dir, "crashed")
			s1 := openServiceHooks(t, filepath.Join(dir, "data"), Hooks{})
			old := submit(t, s1, "totals", updatePipeline(db, false, "Sums", ""), dir)
			waitElements(t, s1, old.ID, "Events", 1500)
			go s1.Update(context.Background(), UpdateRequest{ //nolint:errcheck // the first service "crashed"
				SubmitRequest: SubmitRequest{Name: "totals", Pipeline: updatePipeline(db, true, "Sums", ""), BaseDir: dir}})
			time.Sleep(delay)
			copyDataDirFrozen(t, s1, crashed)

			s2 := openService(t, crashed)
			if all, _, err := s2.History("totals"); err == nil {
				for _, j := range all {
					t.Logf("after the crash: job %s generation %d %s pending_commit %v", j.ID, j.Generation, j.State, j.PendingCommit)
				}
			}
			recoveredExactly(t, s2, db, want)
		})
	}
}

// copyDataDirFrozen is copyDataDir, leaving the registry lock held (a Tx
// that waits) until the test ends.
func copyDataDirFrozen(t *testing.T, s *Service, dst string) {
	t.Helper()
	held, release := make(chan *Tx), make(chan struct{})
	go func() {
		_ = s.core.Update(func(tx *Tx) error {
			held <- tx
			<-release
			return nil
		})
	}()
	tx := <-held
	t.Cleanup(func() { close(release) }) // before s closes
	copyDataDirTx(t, tx, s, dst)
}

// recoveredExactly checks the service recovered from a crashed update: one
// active job, which finishes DONE with want, the table of a run without
// update or crash, in db.
func recoveredExactly(t *testing.T, s2 *Service, db string, want []string) {
	t.Helper()
	active, err := s2.List(StatusActive)
	if err != nil || len(active) != 1 {
		t.Fatalf("active jobs after the crash: %v %v", active, err)
	}
	j := waitDone(t, s2, active[0].ID)
	if j.State != record.StateDone {
		t.Fatalf("job %s after the crash: %s %q", j.ID, j.State, j.Error)
	}
	if got := tableRows(t, db); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("after the update and crash the table holds:\n%s\nwithout either it holds:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
