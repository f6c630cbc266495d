//go:build unix

package bench

import (
	"os"
	"runtime"
	"syscall"
)

// peakRSS returns the peak resident set size of an exited process in
// bytes: Maxrss is in KiB on Linux and the BSDs, in bytes on Darwin.
func peakRSS(st *os.ProcessState) int64 {
	ru, ok := st.SysUsage().(*syscall.Rusage)
	if !ok || ru == nil {
		return 0
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return int64(ru.Maxrss)
	}
	return int64(ru.Maxrss) * 1024
}
