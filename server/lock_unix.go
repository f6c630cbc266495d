//go:build unix

package server

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// tryLock takes an exclusive, non-blocking flock on f: the kernel releases
// it when the process ends, however it ends.
func tryLock(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return ErrDataDirLocked
	}
	if err != nil {
		return fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	return nil
}

// tryLockShared takes a shared, non-blocking flock on f: ErrDataDirLocked
// while another process holds an exclusive one.
func tryLockShared(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return ErrDataDirLocked
	}
	if err != nil {
		return fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	return nil
}
