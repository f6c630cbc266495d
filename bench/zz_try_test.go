package bench

import (
	"context"
	"testing"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/yamlpipe"
)

func TestZZTry(t *testing.T) {
	for _, q := range []string{"q9", "q4"} {
		s, _ := NexmarkYAMLPipeline(q, "{numEvents: 1000000}", 10*time.Second, 5*time.Second)
		p, err := yamlpipe.Load(q+".yaml", []byte(s), yamlpipe.Options{})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		res, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %v, out %d", q, time.Since(start), res.Step("Out").ElementsOut)
	}
}
