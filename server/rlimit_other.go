//go:build !unix

package server

// descriptorLimit reports no limit where RLIMIT_NOFILE does not exist:
// the connection caps then take their fixed defaults.
func descriptorLimit() (uint64, bool) { return 0, false }
