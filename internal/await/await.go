// Package await lets tests wait for a condition they can only observe by
// asking — a job's state over the HTTP API, a child process's answers, a
// broker's counters — instead of sleeping for a fixed time: Until asks at
// a short interval and returns as soon as the condition holds, and a
// deadline, never a guessed delay, bounds the wait. Where a test can be
// told (a channel, a hook, the injectable clock of package mtime), it
// should be told instead of asking.
//
// It may import only the standard library.
package await

import "time"

// Until calls cond at once and then every interval until it returns true
// or timeout has passed since the call; it reports whether cond held. cond
// runs on the caller's goroutine, so it may call t.Fatal.
func Until(timeout, interval time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if cond() {
				return true
			}
		case <-deadline.C:
			return cond()
		}
	}
}
