//go:build unix

package server

import "syscall"

// descriptorLimit returns the process's limit of open descriptors
// (RLIMIT_NOFILE's soft limit, which Go raises to the hard one at start).
func descriptorLimit() (uint64, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, false
	}
	cur := uint64(rl.Cur)
	if cur == 0 || cur >= 1<<62 { // unlimited
		return 0, false
	}
	return cur, true
}
