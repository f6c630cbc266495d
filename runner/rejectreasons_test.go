package runner_test

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/weir-dev/weir"
)

// TestRejectsByReason: a step's rejects are counted by the reason each
// carries, beside their total, whichever worker rejected them.
func TestRejectsByReason(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("w%d", workers), func(t *testing.T) {
			p := weir.NewPipeline()
			s := p.Root()
			var in []int
			for i := range 1000 {
				in = append(in, i)
			}
			nums := weir.Create(s, "Nums", in)
			kept := weir.ParDo(s, "Check", nums, func(_ *weir.Context, n int, emit func(int)) error {
				switch {
				case n%10 == 0:
					return weir.Fail("multiple_of_ten", "%d is a multiple of ten", n)
				case n%7 == 0:
					return weir.Fail("multiple_of_seven", "%d is a multiple of seven", n)
				}
				emit(n)
				return nil
			}, weir.WithErrorOutput("errors"))
			weir.Collect(s, "Kept", kept)
			weir.Collect(s, "Rejected", weir.ErrorOutput(kept))
			res, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: workers})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]int64{}
			for _, n := range in {
				switch {
				case n%10 == 0:
					want["multiple_of_ten"]++
				case n%7 == 0:
					want["multiple_of_seven"]++
				}
			}
			m := res.Step("Check")
			if !maps.Equal(m.RejectsByReason, want) || m.Rejects != want["multiple_of_ten"]+want["multiple_of_seven"] {
				t.Errorf("rejects %d by reason %v, want %d by reason %v", m.Rejects, m.RejectsByReason, want["multiple_of_ten"]+want["multiple_of_seven"], want)
			}
			if got := res.Step("Kept").RejectsByReason; got != nil {
				t.Errorf("a step without rejects counts %v by reason, want none", got)
			}
		})
	}
}
