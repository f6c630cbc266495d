package weir_test

import (
	"context"
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
