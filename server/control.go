package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ErrDataDirLocked is returned when another process holds the data
// directory's lock: stop it, or, for a Go program, start the new build with
// --update so that it asks the running process to release the directory.
var ErrDataDirLocked = errors.New("the data directory is locked by another process")

// Files of the data directory that the process owns.
const (
	// LockFile is flock-ed by the process that owns the data directory.
	LockFile = "process.lock"
	// ControlFileName describes the process that owns the data directory.
	ControlFileName = "process.json"
	// readersLockFile serialises the processes that only read the data
	// directory (ReadLockDataDir).
	readersLockFile = "readers.lock"
)

// lockPoll is how often LockDataDir tries the lock again.
const lockPoll = 50 * time.Millisecond

// DirLock is the lock of a data directory, held from LockDataDir until
// Unlock (or the end of the process).
type DirLock struct {
	f *os.File
	// readers, for a reader's lock (ReadLockDataDir), is the lock that
	// serialises readers with each other.
	readers *os.File
}

// TryLockDataDir takes the lock of dir (creating dir if needed, 0700)
// without waiting; ErrDataDirLocked when another process holds it.
func TryLockDataDir(dir string) (*DirLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the data directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the data directory's lock: %w", err)
	}
	if err := tryLock(f); err != nil {
		f.Close()
		return nil, err
	}
	return &DirLock{f: f}, nil
}

// LockDataDir takes the lock of dir, waiting up to wait for the process
// that holds it to let go; ErrDataDirLocked (wrapped) when it does not.
func LockDataDir(ctx context.Context, dir string, wait time.Duration) (*DirLock, error) {
	deadline := time.Now().Add(wait)
	t := time.NewTicker(lockPoll)
	defer t.Stop()
	for {
		l, err := TryLockDataDir(dir)
		if !errors.Is(err, ErrDataDirLocked) || !time.Now().Before(deadline) {
			if errors.Is(err, ErrDataDirLocked) {
				return nil, fmt.Errorf("waited %s: %w", wait, err)
			}
			return l, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the data directory's lock: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// ReadLockDataDir takes the lock of an existing dir for a process that
// only reads its records (`weir jobs ... --data-dir`): a shared lock that
// the process owning the directory excludes (ErrDataDirLocked while one
// runs; none starts while a reader reads), and an exclusive one among
// readers, waited for up to wait (the state store opens for one process
// at a time, even read-only).
func ReadLockDataDir(ctx context.Context, dir string, wait time.Duration) (*DirLock, error) {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the data directory's lock: %w", err)
	}
	if err := tryLockShared(f); err != nil {
		f.Close()
		return nil, err
	}
	r, err := os.OpenFile(filepath.Join(dir, readersLockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("opening the data directory's readers' lock: %w", err)
	}
	l := &DirLock{f: f, readers: r}
	deadline := time.Now().Add(wait)
	t := time.NewTicker(lockPoll)
	defer t.Stop()
	for {
		err := tryLock(r)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, ErrDataDirLocked) || !time.Now().Before(deadline) {
			_ = l.Unlock()
			if errors.Is(err, ErrDataDirLocked) {
				return nil, fmt.Errorf("waited %s for another reader of the data directory: %w", wait, err)
			}
			return nil, err
		}
		select {
		case <-ctx.Done():
			_ = l.Unlock()
			return nil, fmt.Errorf("waiting for the data directory's readers' lock: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// Unlock releases the lock.
func (l *DirLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	if l.readers != nil {
		_ = l.readers.Close()
		l.readers = nil
	}
	err := l.f.Close() // closing the file releases the flock
	l.f = nil
	if err != nil {
		return fmt.Errorf("releasing the data directory's lock: %w", err)
	}
	return nil
}

// Process kinds in the control file.
const (
	KindServer  = "server"
	KindProgram = "program"
)

// ControlFile is DATA_DIR/process.json: which process owns the data
// directory and where its API answers. It is written once the API serves
// and removed at shutdown; after a crash it stays behind, and the lock
// (not the file) says whether its process is alive.
type ControlFile struct {
	PID int `json:"pid"`
	// Address is the API's base URL, http://host:port.
	Address string `json:"address"`
	// Kind is KindServer or KindProgram.
	Kind string `json:"kind"`
	// JobName is a program's job name.
	JobName string `json:"job_name,omitempty"`
	// Program is a program's executable.
	Program   string    `json:"program,omitempty"`
	StartTime time.Time `json:"start_time"`
}

// ReadControlFile reads DATA_DIR/process.json.
func ReadControlFile(dataDir string) (*ControlFile, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, ControlFileName))
	if err != nil {
		return nil, fmt.Errorf("reading the data directory's control file: %w", err)
	}
	var c ControlFile
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("decoding the data directory's control file %s: %w", ControlFileName, err)
	}
	return &c, nil
}

func writeControlFile(dataDir string, c *ControlFile) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the control file: %w", err)
	}
	path := filepath.Join(dataDir, ControlFileName)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing the control file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing the control file: %w", err)
	}
	return nil
}

func removeControlFile(dataDir string) error {
	err := os.Remove(filepath.Join(dataDir, ControlFileName))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the control file: %w", err)
	}
	return nil
}
