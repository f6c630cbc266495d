package celexpr

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"

	"github.com/weir-dev/weir/runner/contract"
)

// The budgets of one evaluation. CEL has no unbounded loops, but a
// comprehension over a large list (lists.range(n).map(...)) can compute
// for long and build large values from one small element, so every
// evaluation is bounded by CEL's own accounting: its cost (roughly, the
// operations performed and the sizes they touch) and the size of the
// largest value it builds. An element whose expression passes either is
// rejected with reason ReasonLimit, and the job goes on. An expression
// with a comprehension is also evaluated under the run's context, checked
// every InterruptEvery iterations, so cancelling the job interrupts it.

// ReasonLimit is the reject reason of an element whose expression passed
// one of the evaluation's budgets.
const ReasonLimit = "expression_limit"

// Budgets of one CEL evaluation.
const (
	// CostLimit bounds CEL's runtime cost of one evaluation (cel.CostLimit).
	// A comparison or arithmetic costs 1, a string operation about a tenth
	// of the string's length, lists.range(n) n; the expressions of the
	// examples cost under 100.
	CostLimit = 1_000_000
	// MemoryLimit bounds the largest value one evaluation builds, in CEL's
	// size units (cel.MemoryLimit): one per list or map element, one per
	// 10 bytes of a string.
	MemoryLimit = 1_000_000
	// InterruptEvery is how many comprehension iterations pass between
	// checks of the run's context (cel.InterruptCheckFrequency).
	InterruptEvery = 100
)

// InputSizeBound is the size (bytes of a string, elements of a list or
// map) the static cost estimate assumes for each input value: an
// expression whose estimated cost stays within CostLimit for inputs of
// that size can only do work proportional to its inputs, and runs without
// the runtime accounting, which doubles the time of a small expression.
const InputSizeBound = 1 << 20

// inputSizes is the cost estimator that bounds input values by
// InputSizeBound.
type inputSizes struct{}

func (inputSizes) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	if len(n.Path()) > 0 {
		return &cost.SizeEstimate{Min: 0, Max: InputSizeBound}
	}
	return nil
}

func (inputSizes) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}

// boundedCost says whether a's cost is within CostLimit for inputs within
// InputSizeBound and it has no comprehension.
func (sc *Scope) boundedCost(a *cel.Ast) bool {
	if hasLoop(a.NativeRep()) {
		return false
	}
	est, err := sc.env.EstimateCost(a, inputSizes{})
	return err == nil && est.Max <= CostLimit
}

// MaxStringBytes bounds the string one call of replace may build: the
// only string function of CEL's extensions whose result can be the
// product of its arguments' sizes (s.replace("", s) of a 1 MB field would
// be a terabyte), built in one call, before the cost accounting sees it.
const MaxStringBytes = 10 * MemoryLimit

// boundedReplace declares replace again, with the bindings of CEL's
// strings extension preceded by a check of the result's size: an
// evaluation whose replace would build more than MaxStringBytes fails with
// a LimitError.
func boundedReplace() cel.EnvOption {
	repl := func(s, old, repl string, n int64) ref.Val {
		count := int64(strings.Count(s, old))
		if n >= 0 && n < count {
			count = n
		}
		if size := int64(len(s)) + count*(int64(len(repl))-int64(len(old))); size > MaxStringBytes {
			return types.WrapErr(&LimitError{Limit: "cel_string_bytes", Value: MaxStringBytes})
		}
		return types.String(strings.Replace(s, old, repl, int(n)))
	}
	return cel.Function("replace",
		cel.MemberOverload("string_replace_string_string", []*cel.Type{cel.StringType, cel.StringType, cel.StringType}, cel.StringType,
			cel.FunctionBinding(func(args ...ref.Val) ref.Val {
				return repl(string(args[0].(types.String)), string(args[1].(types.String)), string(args[2].(types.String)), -1)
			})),
		cel.MemberOverload("string_replace_string_string_int", []*cel.Type{cel.StringType, cel.StringType, cel.StringType, cel.IntType}, cel.StringType,
			cel.FunctionBinding(func(args ...ref.Val) ref.Val {
				return repl(string(args[0].(types.String)), string(args[1].(types.String)), string(args[2].(types.String)), int64(args[3].(types.Int)))
			})))
}

// limitOptions are the program options that enforce the budgets.
func limitOptions() []cel.ProgramOption {
	return []cel.ProgramOption{cel.CostLimit(CostLimit), cel.MemoryLimit(MemoryLimit), cel.InterruptCheckFrequency(InterruptEvery)}
}

// LimitError is an evaluation that passed a budget.
type LimitError struct {
	// Limit names the budget: cel_cost, cel_memory or cel_string_bytes.
	Limit string
	// Value is the budget's value.
	Value uint64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("the expression passed its %s budget (%d): it computes too much for one element", e.Limit, e.Value)
}

// hasLoop says whether the checked expression has a comprehension, the
// only construct that evaluates for long.
func hasLoop(a *celast.AST) bool {
	found := false
	celast.PostOrderVisit(a.Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() == celast.ComprehensionKind {
			found = true
		}
	}))
	return found
}

// evalErr turns an evaluation error into a LimitError, or into an error
// wrapping ctx's when the run was cancelled, and returns others as they
// are.
func evalErr(ctx context.Context, err error) error {
	var le *LimitError
	if errors.As(err, &le) {
		return le
	}
	var ce interpreter.EvalCancelledError
	if errors.As(err, &ce) {
		switch ce.Cause {
		case interpreter.CostLimitExceeded:
			return &LimitError{Limit: "cel_cost", Value: CostLimit}
		case interpreter.MemoryLimitExceeded:
			return &LimitError{Limit: "cel_memory", Value: MemoryLimit}
		}
	}
	if ctx != nil && ctx.Err() != nil && (errors.As(err, &ce) || errors.Is(err, interpreter.InterruptError{})) {
		return fmt.Errorf("the expression was interrupted: %w", ctx.Err())
	}
	return err
}

// EvalError wraps a CEL runtime failure as an element error: reason
// ReasonLimit for a budget, evaluation_error otherwise. An interruption by
// the run's cancellation is returned as it is (it wraps the context's
// error), so the executor ends the run instead of rejecting the element.
func EvalError(what string, err error) error {
	var le *LimitError
	switch {
	case errors.As(err, &le):
		return &contract.ElementError{Reason: ReasonLimit, Message: fmt.Sprintf("%s: %v", what, err)}
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return &contract.ElementError{Reason: "evaluation_error", Message: fmt.Sprintf("%s: %v", what, err)}
}
