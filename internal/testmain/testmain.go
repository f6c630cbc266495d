// Package testmain runs a package's tests from its TestMain with the
// package's own default for how many tests run at once. Tests that mostly
// wait on running jobs, child processes or timers, not on the CPU, can
// run more at once than the machine has cores (go test's default); an
// explicit -test.parallel still wins.
//
// It may import only the standard library.
package testmain

import (
	"flag"
	"strconv"
	"testing"
)

// Run parses the test flags, sets -test.parallel to parallel unless the
// command line gave it, and runs m, returning its exit code for os.Exit.
func Run(m *testing.M, parallel int) int {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(max(parallel, 1))); err != nil {
			panic(err) // the testing package registers the flag
		}
	}
	return m.Run()
}
