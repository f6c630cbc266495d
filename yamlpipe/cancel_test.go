package yamlpipe

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"

	"cel.dev/cel-go/cel"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/yamlpipe/celexpr"
)

// stuckFn evaluates, for every element, a CEL comprehension that runs for
// hours, with the budgets lifted: only cancelling the run stops it.
type stuckFn struct {
	sc      *celexpr.Scope
	p       *celexpr.Program
	started chan struct{}
	once    sync.Once
}

func (f *stuckFn) Process(pc *contract.ProcessContext, _ contract.Element) error {
	f.once.Do(func() { close(f.started) })
	act := celexpr.NewActivation(f.sc)
	act.Reset(&row.Row{Schema: f.sc.Schema(), Values: []any{int64(1_000_000)}}, pc)
	_, err := act.EvalBool(f.p)
	return celexpr.EvalError("keep", err)
}

// Cancelling a run whose step is stuck in an expression's loop interrupts
// the evaluation: the run ends with the cancellation, and the element is
// not rejected (it would go to the dead letters though nothing failed). Before, the evaluation ran on and the job
// stayed CANCELLING until a restart.
func TestCancelInterruptsStuckExpression(t *testing.T) {
	schema := row.MustSchema(row.Field{Name: "n", Type: row.Of(row.KindInt)})
	sc, err := celexpr.NewScope(schema, nil, nil, cel.CostLimit(math.MaxUint64), cel.MemoryLimit(math.MaxUint32))
	if err != nil {
		t.Fatal(err)
	}
	prg, _, err := sc.Compile("lists.range(n).all(i, lists.range(n).all(j, i + j >= 0))")
	if err != nil {
		t.Fatal(err)
	}
	fn := &stuckFn{sc: sc, p: prg, started: make(chan struct{})}
	p := weir.NewPipeline()
	s := p.Root()
	in := weir.Create(s, "In", []int64{1})
	weir.ParDoFn[int64, int64](s, "Stuck", in, fn)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-fn.started
		cancel()
	}()
	var rejects []contract.Reject
	var mu sync.Mutex
	_, err = weir.Run(ctx, p, weir.RunOptions{NumWorkers: 1, DeadLetter: func(_ context.Context, r contract.Reject) error {
		mu.Lock()
		defer mu.Unlock()
		rejects = append(rejects, r)
		return nil
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run ended with %v, want the cancellation", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(rejects) != 0 {
		t.Fatalf("the interrupted element was rejected: %+v", rejects)
	}
}
