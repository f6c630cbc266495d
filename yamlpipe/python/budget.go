package python

import (
	"context"
	"errors"
	"fmt"
	"strings"

	starjson "go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

// The budgets of one call. go.starlark.net bounds the steps of a thread
// (SetMaxExecutionSteps) and the result of one repetition (1 GiB), but
// counts no memory, and one step can build a value as large as the
// product of its operands ('x' * 10**9, s.replace('', s), list(range(N)))
// or format an exponentially large one (str of a list that holds itself
// twice, 40 levels deep). Forks that count allocations
// (github.com/canonical/starlark) are not available from the module
// proxy weir builds from and lag upstream, so weir keeps go.starlark.net
// and accounts at the operations that can build large values:
//
//   - the compiled code is rewritten so that +, * and % (and += and *= on
//     a name), and the methods replace, join, extend and format, go
//     through builtins that charge the size of what they are about to
//     build before building it;
//   - the builtins that materialize a sequence (list, tuple, sorted, set,
//     dict, enumerate, zip, reversed) charge its length first; str, repr,
//     json.encode and json.indent measure their argument (shared parts
//     counted each time they would be printed) before formatting it, and
//     print formats nothing (its output is discarded anyway);
//   - the result's conversion to a row value is measured the same way.
//
// A call may build MaxAllocBytes in all (cumulative, like the allocation
// counts of the forks: a value that dies is not refunded) and run
// MaxSteps steps; what a step builds one element at a time (a
// comprehension) is bounded by the steps. An element past either is
// rejected with reason ReasonLimit. The run's context is checked every
// stepChunk steps, so cancelling the job interrupts a call stuck in a
// loop.

// ReasonLimit is the reject reason of an element whose code passed one of
// the call's budgets.
const ReasonLimit = "expression_limit"

// Budgets of one call.
const (
	// MaxSteps bounds the Starlark steps of one call.
	MaxSteps = 10_000_000
	// MaxAllocBytes bounds the bytes the accounted operations of one call
	// may build, in all.
	MaxAllocBytes = 64 << 20
	// stepChunk is how many steps pass between checks of the run's
	// context.
	stepChunk = 100_000
	// elemBytes is what one element of a list, tuple, dict or set is
	// charged.
	elemBytes = 16
)

// LimitError is a call that passed a budget.
type LimitError struct {
	// Limit names the budget: python_steps or python_alloc_bytes.
	Limit string
	// Value is the budget's value.
	Value int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("the code passed its %s budget (%d): it computes too much for one element", e.Limit, e.Value)
}

// budget is the accounting of one call, in the thread's locals.
type budget struct {
	ctx   context.Context
	start uint64 // the thread's steps when the call began
	used  int64  // bytes charged
	// limit is the budget the call passed, if any.
	limit *LimitError
}

const budgetKey = "weir-budget"

// budgetOf returns the thread's budget (a fresh unlimited-context one for
// threads that have none, such as the compiler's).
func budgetOf(th *starlark.Thread) *budget {
	if b, ok := th.Local(budgetKey).(*budget); ok {
		return b
	}
	b := &budget{ctx: context.Background()}
	th.SetLocal(budgetKey, b)
	return b
}

// charge counts n bytes about to be built.
func (b *budget) charge(n int64) error {
	if n < 0 || b.used+n > MaxAllocBytes || b.used+n < b.used {
		b.limit = &LimitError{Limit: "python_alloc_bytes", Value: MaxAllocBytes}
		return b.limit
	}
	b.used += n
	return nil
}

// begin starts a call's accounting on th under ctx.
func begin(th *starlark.Thread, ctx context.Context) *budget {
	b := budgetOf(th)
	b.ctx, b.start, b.used, b.limit = ctx, th.ExecutionSteps(), 0, nil
	th.OnMaxSteps = onMaxSteps
	th.SetMaxExecutionSteps(b.start + min(stepChunk, MaxSteps))
	return b
}

// onMaxSteps runs every stepChunk steps: it stops the call when the run
// is cancelled or the call has run MaxSteps, and lets it go on otherwise.
func onMaxSteps(th *starlark.Thread) {
	b := budgetOf(th)
	steps := th.ExecutionSteps() - b.start
	switch {
	case b.ctx.Err() != nil:
		th.Cancel("the job was cancelled")
	case steps >= MaxSteps:
		b.limit = &LimitError{Limit: "python_steps", Value: MaxSteps}
		th.Cancel("too many steps")
	default:
		th.SetMaxExecutionSteps(b.start + min(steps+stepChunk, MaxSteps))
	}
}

// sizeOf measures v as printing it would spell it out (a part shared by
// several containers counted each time, a cycle once) and charges it. The
// size of each container is computed once, so a value that would print as
// an exponentially long text is measured in time linear in its parts.
func (b *budget) sizeOf(v starlark.Value) error {
	const inProgress = -1
	memo := map[any]int64{}
	var size func(v starlark.Value) int64
	size = func(v starlark.Value) int64 {
		var key any
		switch x := v.(type) {
		case starlark.String:
			return int64(len(x))
		case starlark.Bytes:
			return int64(len(x))
		case *starlark.List, *starlark.Dict, *starlark.Set:
			key = x
		case starlark.Tuple:
			if len(x) == 0 {
				return elemBytes
			}
			key = &x[0]
		default:
			return elemBytes
		}
		if s, ok := memo[key]; ok {
			if s == inProgress {
				return elemBytes // a cycle prints as [...]
			}
			return s
		}
		memo[key] = inProgress
		total := int64(elemBytes)
		add := func(n int64) {
			if total += n; total > MaxAllocBytes || total < 0 {
				total = MaxAllocBytes + 1
			}
		}
		switch x := v.(type) {
		case *starlark.List:
			for i, n := 0, x.Len(); i < n && total <= MaxAllocBytes; i++ {
				add(size(x.Index(i)))
			}
		case starlark.Tuple:
			for i := 0; i < len(x) && total <= MaxAllocBytes; i++ {
				add(size(x[i]))
			}
		case *starlark.Dict:
			for _, kv := range x.Items() {
				add(size(kv[0]))
				add(size(kv[1]))
				if total > MaxAllocBytes {
					break
				}
			}
		case *starlark.Set:
			it := x.Iterate()
			var e starlark.Value
			for total <= MaxAllocBytes && it.Next(&e) {
				add(size(e))
			}
			it.Done()
		}
		memo[key] = total
		return total
	}
	return b.charge(size(v))
}

// lenOf is the length of v when it has one cheaply, else 0.
func lenOf(v starlark.Value) int64 {
	if s, ok := v.(starlark.Sequence); ok {
		return int64(s.Len())
	}
	if s, ok := v.(starlark.String); ok {
		return int64(len(s))
	}
	return 0
}

// ---- the accounted operations ----

// addOp is x + y.
func addOp(th *starlark.Thread, x, y starlark.Value) (starlark.Value, error) {
	b := budgetOf(th)
	switch x.(type) {
	case starlark.String, starlark.Bytes:
		if err := b.charge(lenOf(x) + lenOf(y)); err != nil {
			return nil, err
		}
	case *starlark.List, starlark.Tuple:
		if err := b.charge(elemBytes * (lenOf(x) + lenOf(y))); err != nil {
			return nil, err
		}
	}
	return starlark.Binary(syntax.PLUS, x, y)
}

// mulOp is x * y.
func mulOp(th *starlark.Thread, x, y starlark.Value) (starlark.Value, error) {
	seq, n := x, y
	if _, ok := x.(starlark.Int); ok {
		seq, n = y, x
	}
	if k, ok := n.(starlark.Int); ok {
		per := int64(0)
		switch seq.(type) {
		case starlark.String, starlark.Bytes:
			per = lenOf(seq)
		case *starlark.List, starlark.Tuple:
			per = elemBytes * lenOf(seq)
		}
		if per > 0 {
			times, ok := k.Int64()
			if !ok || times > 0 && per > (MaxAllocBytes+1)/times {
				return nil, budgetOf(th).charge(MaxAllocBytes + 1)
			}
			if times > 0 {
				if err := budgetOf(th).charge(per * times); err != nil {
					return nil, err
				}
			}
		}
	}
	return starlark.Binary(syntax.STAR, x, y)
}

// modOp is x % y: formatting when x is a string.
func modOp(th *starlark.Thread, x, y starlark.Value) (starlark.Value, error) {
	if s, ok := x.(starlark.String); ok {
		b := budgetOf(th)
		if err := b.charge(int64(len(s))); err != nil {
			return nil, err
		}
		if err := b.sizeOf(y); err != nil {
			return nil, err
		}
	}
	return starlark.Binary(syntax.PERCENT, x, y)
}

// iaddOp is x += y: in place for a list, as Python and Starlark do.
func iaddOp(th *starlark.Thread, x, y starlark.Value) (starlark.Value, error) {
	if l, ok := x.(*starlark.List); ok {
		if err := budgetOf(th).charge(elemBytes * lenOf(y)); err != nil {
			return nil, err
		}
		it := starlark.Iterate(y)
		if it == nil {
			return nil, fmt.Errorf("unknown binary op: list += %s", y.Type())
		}
		defer it.Done()
		var e starlark.Value
		for it.Next(&e) {
			if err := l.Append(e); err != nil {
				return nil, err
			}
		}
		return l, nil
	}
	return addOp(th, x, y)
}

// binop makes a builtin of an operation.
func binop(name string, op func(*starlark.Thread, starlark.Value, starlark.Value) (starlark.Value, error)) *starlark.Builtin {
	return starlark.NewBuiltin(name, func(th *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
		return op(th, args[0], args[1])
	})
}

// methodCall is recv.name(args...) for the methods that can build large
// values: replace, join, extend and format are charged first.
func methodCall(th *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	recv, name := args[0], string(args[1].(starlark.String))
	rest := args[2:]
	ha, ok := recv.(starlark.HasAttrs)
	var m starlark.Value
	if ok {
		var err error
		if m, err = ha.Attr(name); err != nil {
			return nil, err
		}
	}
	if m == nil {
		return nil, fmt.Errorf("%s has no .%s field or method", recv.Type(), name)
	}
	b := budgetOf(th)
	var err error
	switch s, isStr := recv.(starlark.String); {
	case name == "replace" && isStr && len(rest) >= 2:
		old, ok1 := rest[0].(starlark.String)
		repl, ok2 := rest[1].(starlark.String)
		if ok1 && ok2 {
			n := int64(strings.Count(string(s), string(old)))
			if len(rest) > 2 {
				if k, ok := rest[2].(starlark.Int); ok {
					if c, ok := k.Int64(); ok && c >= 0 && c < n {
						n = c
					}
				}
			}
			if grow := int64(len(repl)) - int64(len(old)); grow > 0 && n > 0 && grow > (MaxAllocBytes+1)/n {
				err = b.charge(MaxAllocBytes + 1)
			} else {
				err = b.charge(int64(len(s)) + n*max(grow, 0))
			}
		}
	case name == "join" && isStr && len(rest) == 1:
		var total int64
		count := lenOf(rest[0])
		if count > 0 && int64(len(s)) > (MaxAllocBytes+1)/count {
			err = b.charge(MaxAllocBytes + 1)
			break
		}
		total = int64(len(s)) * count
		if it := starlark.Iterate(rest[0]); it != nil {
			var e starlark.Value
			for it.Next(&e) {
				total += lenOf(e)
			}
			it.Done()
		}
		err = b.charge(total)
	case name == "extend" && len(rest) == 1:
		if _, ok := recv.(*starlark.List); ok {
			err = b.charge(elemBytes * lenOf(rest[0]))
		}
	case name == "format" && isStr:
		err = b.charge(int64(len(s)))
		for _, a := range rest {
			if err == nil {
				err = b.sizeOf(a)
			}
		}
		for _, kv := range kwargs {
			if err == nil {
				err = b.sizeOf(kv[1])
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return starlark.Call(th, m, rest, kwargs)
}

// wrap returns the builtin name of Starlark's universe, charged first by
// pre.
func wrap(name string, pre func(b *budget, args starlark.Tuple) error) *starlark.Builtin {
	orig := starlark.Universe[name]
	return starlark.NewBuiltin(name, func(th *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if err := pre(budgetOf(th), args); err != nil {
			return nil, err
		}
		return starlark.Call(th, orig, args, kwargs)
	})
}

// chargeLens charges elemBytes for each element of each argument.
func chargeLens(b *budget, args starlark.Tuple) error {
	var n int64
	for _, a := range args {
		n += lenOf(a)
	}
	return b.charge(elemBytes * n)
}

// chargeSizes measures each argument as printing would.
func chargeSizes(b *budget, args starlark.Tuple) error {
	for _, a := range args {
		if err := b.sizeOf(a); err != nil {
			return err
		}
	}
	return nil
}

// accounted are the predeclared names of the accounting: the operation
// builtins the rewritten code calls, and the builtins and modules that
// shadow Starlark's.
func accounted() starlark.StringDict {
	d := starlark.StringDict{
		opAdd:    binop(opAdd, addOp),
		opMul:    binop(opMul, mulOp),
		opMod:    binop(opMod, modOp),
		opIAdd:   binop(opIAdd, iaddOp),
		opMethod: starlark.NewBuiltin(opMethod, methodCall),
		"print": starlark.NewBuiltin("print", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			return starlark.None, nil
		}),
	}
	for _, name := range []string{"list", "tuple", "sorted", "set", "dict", "enumerate", "zip", "reversed"} {
		d[name] = wrap(name, chargeLens)
	}
	for _, name := range []string{"str", "repr"} {
		d[name] = wrap(name, chargeSizes)
	}
	members := starlark.StringDict{}
	for k, v := range starjson.Module.Members {
		members[k] = v
		if k == "encode" || k == "indent" {
			orig := v
			members[k] = starlark.NewBuiltin("json."+k, func(th *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
				if err := chargeSizes(budgetOf(th), args); err != nil {
					return nil, err
				}
				return starlark.Call(th, orig, args, kwargs)
			})
		}
	}
	d["json"] = &starlarkstruct.Module{Name: "json", Members: members}
	return d
}

// limitOr returns the budget the call passed, from the accounting or
// from err, if any.
func (b *budget) limitOr(err error) *LimitError {
	if b.limit != nil {
		return b.limit
	}
	var le *LimitError
	if errors.As(err, &le) {
		return le
	}
	return nil
}
