package service

import (
	"os"
	"testing"

	"github.com/weir-dev/weir/internal/testmain"
)

// testParallel is how many tests run at once unless -test.parallel says
// otherwise. Most of this package's tests wait on running jobs (windows
// closing, checkpoints, retention), not on the CPU, so more of them run at
// once than the machine has cores.
const testParallel = 8

func TestMain(m *testing.M) { os.Exit(testmain.Run(m, testParallel)) }
