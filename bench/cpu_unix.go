//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processCPU returns this process's user + system CPU time so far (0 if
// the platform does not report it).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// minorFaults returns this process's minor page faults so far (0 if the
// platform does not report them): each is a first touch of a page of
// memory, which a virtual machine may back only then.
func minorFaults() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return int64(ru.Minflt)
}
