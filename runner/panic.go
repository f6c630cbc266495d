package runner

import (
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
)

// This file turns a panic in a worker's goroutine — a step's code, a
// connector, a library they call — into the failure of its execution
// instead of the loss of the process, and with it of every other job the
// process runs.

// PanicError is the failure of an execution whose code panicked: a bug in a
// step's code (a Go SDK function), a connector or a library they call (a
// malformed input a library did not expect). The execution stops as for
// any other failure: nothing after its last checkpoint commits.
type PanicError struct {
	// Step is the step whose code was running, "" when the panic was in
	// the runner's own code between steps.
	Step string
	// Value is what the code panicked with. A PanicError does not unwrap
	// to it: a panic with an error such as context.Canceled is not that
	// error.
	Value any
	// Where is the function that panicked (the innermost frame outside
	// the Go runtime).
	Where string
	// Stack is the goroutine's stack at the panic.
	Stack []byte
}

// Error names the step, the panic's value and the function it came from.
func (e *PanicError) Error() string {
	var b strings.Builder
	if e.Step != "" {
		fmt.Fprintf(&b, "step %q panicked: ", e.Step)
	} else {
		b.WriteString("the runner panicked: ")
	}
	fmt.Fprintf(&b, "%v", e.Value)
	if e.Where != "" {
		fmt.Fprintf(&b, " (in %s)", e.Where)
	}
	b.WriteString("; the log holds the stack")
	return b.String()
}

// recovered is the PanicError of the panic p, recovered in a goroutine of
// r whose code was running step (its stepPlan.idx+1; 0 for none), logged
// to the run's logger. Call it from the deferred function that recovered
// p, so that the stack is the panic's.
func (r *run) recovered(p any, step int) *PanicError {
	var name string
	if step > 0 && step <= len(r.steps) {
		name = r.steps[step-1].step.Name
	}
	return newPanic(r.opts.Logger, name, p)
}

// guard runs fn, code of step (a sink's commit, close or release; a
// source's acknowledgement) called from the job service's goroutine
// rather than a worker's, and returns its panic, logged to log, as a
// PanicError.
func guard(log *slog.Logger, step string, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = newPanic(log, step, p)
		}
	}()
	return fn()
}

// newPanic is the PanicError of the panic p in step's code, logged with
// its stack to log (nil: slog.Default()). Call it from the deferred
// function that recovered p.
func newPanic(log *slog.Logger, step string, p any) *PanicError {
	e := &PanicError{Step: step, Value: p, Stack: debug.Stack(), Where: panicFrame()}
	if log == nil {
		log = slog.Default()
	}
	log.Error("a step panicked: the execution stops", "step", step, "panic", fmt.Sprint(p), "where", e.Where, "stack", string(e.Stack))
	return e
}

// panicFrame is the innermost function of the panicking goroutine outside
// the Go runtime: the first frame below runtime.gopanic, called from a
// deferred function while the goroutine panics ("" otherwise).
func panicFrame() string {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(2, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	panicking := false
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			panicking = true
		case panicking && f.Function != "" && !strings.HasPrefix(f.Function, "runtime."):
			return f.Function
		}
		if !more {
			return ""
		}
	}
}
