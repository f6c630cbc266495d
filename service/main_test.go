package service

import (
	"flag"
	"os"
	"testing"
)

// testParallel is how many tests run at once unless -test.parallel says
// otherwise. Most of this package's tests wait on running jobs (windows
// closing, checkpoints, retention), not on the CPU, so more of them run at
// once than the machine has cores.
const testParallel = "8"

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", testParallel); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
