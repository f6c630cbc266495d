//go:build !unix

package bench

import "os"

// peakRSS is not measured on this platform.
func peakRSS(*os.ProcessState) int64 { return 0 }
