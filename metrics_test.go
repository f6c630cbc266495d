package weir_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/runner/contract"
)

// TestUserMetrics: a DoFn's counter and distribution are summed per step
// over every worker, exactly once per element processed, and a step that
// updates none reports none.
func TestUserMetrics(t *testing.T) {
	big := weir.NewCounter("orders", "big")
	amounts := weir.NewDistribution("orders", "amount")
	for _, workers := range []int{1, 3} {
		p := weir.NewPipeline()
		s := p.Root()
		var vals []int64
		for i := int64(1); i <= 1000; i++ {
			vals = append(vals, i)
		}
		nums := weir.Create(s, "Nums", vals)
		kept := weir.ParDo(s, "Measure", nums, func(c *weir.Context, v int64, emit func(int64)) error {
			if v > 900 {
				big.Inc(c, 1)
			}
			amounts.Update(c, v)
			emit(v)
			return nil
		})
		weir.Collect(s, "Out", kept)
		res, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: workers})
		if err != nil {
			t.Fatal(err)
		}
		want := []contract.UserMetric{
			{MetricName: contract.MetricName{Namespace: "orders", Name: "amount"}, Kind: contract.MetricDistribution, Count: 1000, Sum: 500500, Min: 1, Max: 1000},
			{MetricName: contract.MetricName{Namespace: "orders", Name: "big"}, Kind: contract.MetricCounter, Value: 100},
		}
		for _, st := range res.Steps {
			switch st.Name {
			case "Measure":
				if !reflect.DeepEqual(st.User, want) {
					t.Errorf("%d workers: Measure's user metrics %+v, want %+v", workers, st.User, want)
				}
			default:
				if st.User != nil {
					t.Errorf("%d workers: %s reports user metrics %+v", workers, st.Name, st.User)
				}
			}
		}
	}
}

// TestUserMetricsStateful: a stateful ParDo's code counts through its
// StateContext as a stateless one does, per step, over every worker.
func TestUserMetricsStateful(t *testing.T) {
	seen := weir.NewCounter("keys", "first_seen")
	for _, workers := range []int{1, 2} {
		p := weir.NewPipeline()
		s := p.Root()
		var vals []weir.KV[string, int64]
		for i := int64(0); i < 300; i++ {
			vals = append(vals, weir.KV[string, int64]{Key: fmt.Sprint("k", i%30), Value: i})
		}
		first := weir.ValueState[bool]{ID: "seen"}
		out := weir.StatefulParDo(s, "FirstSeen", weir.Create(s, "In", vals), weir.StatefulFn[string, int64, int64]{
			State: []weir.StateDecl{first},
			Process: func(c *weir.StateContext[string, int64], v int64) error {
				if _, ok := first.Read(c); !ok {
					first.Write(c, true)
					seen.Inc(c, 1)
				}
				c.Output(v)
				return nil
			},
		})
		weir.Collect(s, "Out", out)
		res, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: workers})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range res.Steps {
			if st.Name == "FirstSeen" && (len(st.User) != 1 || st.User[0].Value != 30) {
				t.Errorf("%d workers: FirstSeen's user metrics %+v, want keys/first_seen 30", workers, st.User)
			}
		}
	}
}
