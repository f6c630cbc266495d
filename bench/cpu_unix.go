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
