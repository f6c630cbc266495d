package jinja

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	ajinja "github.com/ardanlabs/jinja"
)

// The budgets of a render. The Jinja engine has no hooks to bound what a
// template computes: a 170-byte template looping over range(20000000), or
// printing 'x' * 2000000000, took a server past 2 GiB in seconds (issue
// 22 item 10), and a macro that calls itself overflows the stack, which
// kills the process. So:
//
//   - range is weir's own, counting the items of every range() of a
//     render against RangeItems (Jinja's sandbox has such a MAX_RANGE);
//   - the rendered text is refused past OutputBytes;
//   - a macro that calls itself, directly or through other macros, is
//     refused before rendering;
//   - a Sandbox renders in a child process that cannot take more than
//     MemoryBytes of memory (its address space is limited) and is killed
//     after Time, so string multiplication, concatenation in loops or
//     long macro chains, which no hook reaches, cannot exhaust the
//     server. Servers render the templates they are sent in one; a render
//     in this process (no Sandbox) has the range and recursion bounds, and
//     its output is checked only once the engine has built it.
//
// Passing a budget is an error matching ErrBudgetExceeded that names the
// budget and its value (a LimitError).

// Limits are the budgets of one render.
type Limits struct {
	// Time bounds the render's wall-clock time (Sandbox only).
	Time time.Duration
	// MemoryBytes bounds the memory the render may take above what the
	// child process starts with (Sandbox only).
	MemoryBytes int64
	// OutputBytes bounds the rendered text.
	OutputBytes int
	// RangeItems bounds the items of all range() calls of one render.
	RangeItems int64
}

// DefaultLimits are the budgets of a render unless told otherwise: ample
// for a pipeline file (the examples render in milliseconds, in a few KiB).
func DefaultLimits() Limits {
	return Limits{Time: 10 * time.Second, MemoryBytes: 256 << 20, OutputBytes: 8 << 20, RangeItems: 1_000_000}
}

// LimitError is a render that passed a budget.
type LimitError struct {
	// Limit names the budget: jinja_time, jinja_memory,
	// jinja_output_bytes or jinja_range_items.
	Limit string
	// Value is the budget's value, as the documentation spells it.
	Value string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("the template passed its %s budget (%s)", e.Limit, e.Value)
}

// Is makes a LimitError match ErrBudgetExceeded.
func (e *LimitError) Is(target error) bool { return target == ErrBudgetExceeded }

// budgetError places a LimitError in the file, at its first line: the
// engine does not say where the render was.
func budgetError(file string, le *LimitError, hint string) *Error {
	return &Error{File: file, Line: 1, Col: 1, Err: le, Msg: fmt.Sprintf("Jinja: %v: %s", le, hint)}
}

// rangeFn is Jinja's range, counting the items of every call of one
// render against max (left is what remains) before making them.
func rangeFn(left *int64, max int64) ajinja.Value {
	return ajinja.NewCallable("range", func(args []ajinja.Value, _ map[string]ajinja.Value) (ajinja.Value, error) {
		var start, stop, step int64 = 0, 0, 1
		switch len(args) {
		case 1:
			stop = toInt(args[0])
		case 2:
			start, stop = toInt(args[0]), toInt(args[1])
		case 3:
			start, stop, step = toInt(args[0]), toInt(args[1]), toInt(args[2])
		default:
			return ajinja.Undefined(), fmt.Errorf("range: expected 1-3 arguments, got %d", len(args))
		}
		if step == 0 {
			return ajinja.Undefined(), fmt.Errorf("range: step must not be zero")
		}
		var n int64
		switch {
		case step > 0 && stop > start:
			n = (stop - start + step - 1) / step
		case step < 0 && stop < start:
			n = (start - stop - step - 1) / -step
		}
		if n < 0 || n > *left {
			*left = -1
			return ajinja.Undefined(), &LimitError{Limit: "jinja_range_items", Value: fmt.Sprint(max)}
		}
		*left -= n
		items := make([]ajinja.Value, 0, n)
		for i, v := int64(0), start; i < n; i, v = i+1, v+step {
			items = append(items, ajinja.NewInt(v))
		}
		return ajinja.NewList(items), nil
	})
}

// toInt reads an integer argument as the engine's own range does.
func toInt(v ajinja.Value) int64 {
	switch {
	case v.IsInt():
		return v.AsInt()
	case v.IsFloat():
		return int64(v.AsFloat())
	case v.IsBool():
		if v.AsBool() {
			return 1
		}
		return 0
	case v.IsString():
		var n int64
		_, _ = fmt.Sscanf(v.AsString(), "%d", &n)
		return n
	}
	return 0
}

// refuseRecursion refuses a macro of text that calls itself, directly or
// through other macros: the engine recurses on Go's stack, without a
// bound, and a stack overflow ends the process.
func refuseRecursion(file, text string) error {
	type macro struct {
		at   int
		body string
	}
	macros := map[string]macro{}
	var order []string
	for _, m := range jinjaMacro.FindAllStringSubmatchIndex(text, -1) {
		name := text[m[2]:m[3]]
		if _, dup := macros[name]; !dup {
			order = append(order, name)
		}
		macros[name] = macro{at: m[0], body: text[m[3]:m[1]]}
	}
	calls := map[string][]string{}
	for _, name := range order {
		for _, tag := range jinjaTag.FindAllString(macros[name].body, -1) {
			for _, callee := range order {
				if strings.Contains(tag, callee) && regexp.MustCompile(`\b`+regexp.QuoteMeta(callee)+`\s*\(`).MatchString(tag) {
					calls[name] = append(calls[name], callee)
				}
			}
		}
	}
	// Depth-first search for a cycle, in the order the macros appear.
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(n string) []string
	visit = func(n string) []string {
		state[n] = open
		path = append(path, n)
		for _, c := range calls[n] {
			switch state[c] {
			case open:
				for i, p := range path {
					if p == c {
						return append(append([]string{}, path[i:]...), c)
					}
				}
			case unseen:
				if cyc := visit(c); cyc != nil {
					return cyc
				}
			}
		}
		path = path[:len(path)-1]
		state[n] = done
		return nil
	}
	for _, name := range order {
		if state[name] != unseen {
			continue
		}
		if cyc := visit(name); cyc != nil {
			at := macros[cyc[0]].at
			return &Error{File: file, Line: lineAt(text, at), Col: 1 + at - (strings.LastIndex(text[:at], "\n") + 1),
				Msg: fmt.Sprintf("Jinja: macro %s calls itself (%s); weir does not render recursive macros, whose depth nothing bounds", cyc[0], strings.Join(cyc, " → "))}
		}
	}
	return nil
}
