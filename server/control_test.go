package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestDataDirLock: one holder at a time; a second one is told who holds
// the directory (from the control file), and gets it once it is released.
func TestDataDirLock(t *testing.T) {
	dir := t.TempDir()
	l1, err := TryLockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TryLockDataDir(dir); !errors.Is(err, ErrDataDirLocked) {
		t.Fatalf("second lock: %v, want ErrDataDirLocked", err)
	}
	if err := writeControlFile(dir, &ControlFile{PID: 4242, Address: "http://127.0.0.1:1", Kind: KindProgram, JobName: "counts", Program: "/bin/counts"}); err != nil {
		t.Fatal(err)
	}
	msg := InUseError(dir, ErrDataDirLocked).Error()
	for _, want := range []string{"4242", "http://127.0.0.1:1", "counts"} {
		if !strings.Contains(msg, want) {
			t.Errorf("in-use error %q lacks %q", msg, want)
		}
	}
	if _, err := LockDataDir(context.Background(), dir, 120*time.Millisecond); !errors.Is(err, ErrDataDirLocked) {
		t.Fatalf("waiting for a held lock: %v, want ErrDataDirLocked", err)
	}
	got := make(chan error, 1)
	go func() {
		l2, err := LockDataDir(context.Background(), dir, time.Minute)
		if err == nil {
			err = l2.Unlock()
		}
		got <- err
	}()
	if err := l1.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("lock after the release: %v", err)
	}
}
