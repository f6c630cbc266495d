//go:build !unix

package server

import "os"

// tryLock does nothing where flock is not available: the state store's own
// lock is then the only protection of the data directory.
func tryLock(*os.File) error { return nil }

// tryLockShared does nothing where flock is not available.
func tryLockShared(*os.File) error { return nil }
