//go:build !unix

package bench

import "time"

// processCPU returns 0: the platform's CPU time is not read.
func processCPU() time.Duration { return 0 }

// minorFaults returns 0: the platform's page faults are not read.
func minorFaults() int64 { return 0 }
