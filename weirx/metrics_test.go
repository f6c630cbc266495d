package weirx_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/weirx"
)

// TestProgramUserMetrics: a Go program's counter and distribution reach
// its job's record as the step's user_metrics, exact, and the record is
// readable after the program exited (the data directory opened read-only,
// as `weir jobs describe --data-dir` does).
func TestProgramUserMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := weir.NewCounter("orders", "big")
	amounts := weir.NewDistribution("orders", "amount")
	build := func(p *weir.Pipeline) error {
		s := p.Root()
		var vals []int64
		for i := int64(1); i <= 100; i++ {
			vals = append(vals, i)
		}
		out := weir.ParDo(s, "Measure", weir.Create(s, "Nums", vals), func(c *weir.Context, v int64, emit func(int64)) error {
			if v > 90 {
				big.Inc(c, 1)
			}
			amounts.Update(c, v)
			emit(v)
			return nil
		})
		weir.Collect(s, "Out", out)
		return nil
	}
	var out bytes.Buffer
	if err := weirx.Run(context.Background(), []string{"--job-name", "m", "--data-dir", dir, "--num-workers", "2"}, &out, build); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	svc, err := service.Open(context.Background(), service.Options{DataDir: dir, Inspect: true})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(context.Background())
	j, err := svc.Get("m")
	if err != nil {
		t.Fatal(err)
	}
	if j.State != record.StateDone || j.Metrics == nil {
		t.Fatalf("job %s, metrics %v", j.State, j.Metrics)
	}
	var got []record.UserMetric
	for _, st := range j.Metrics.Steps {
		if st.Name == "Measure" {
			got = st.UserMetrics
		}
	}
	if len(got) != 2 || got[0].Name != "amount" || got[0].Count == nil || *got[0].Count != 100 || *got[0].Sum != 5050 ||
		*got[0].Min != 1 || *got[0].Max != 100 || got[1].Name != "big" || got[1].Value == nil || *got[1].Value != 10 {
		t.Errorf("Measure's user metrics %+v, want amount {100, 5050, 1, 100} and big 10", got)
	}
	if _, err := svc.Submit(context.Background(), service.SubmitRequest{Name: "x", Pipeline: "pipeline: []"}); errcode.Of(err) != errcode.ReadOnlyInspection {
		t.Errorf("a submission to a read-only data directory: %v, want READ_ONLY_INSPECTION", err)
	}
}
