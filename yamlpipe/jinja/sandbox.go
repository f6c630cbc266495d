package jinja

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Sandbox renders templates in a child process: a program (the weir
// binary itself) that calls ServeSandbox when IsSandboxChild says so. The
// child limits its own address space to what it started with plus
// Limits.MemoryBytes, so an allocation past it fails and the child dies
// instead of the server, and the parent kills it after Limits.Time or
// when the render's context is done. A render costs a process start
// (about 10 ms).
type Sandbox struct {
	// Exe is the program to run (os.Executable of a binary that serves
	// sandboxed renders).
	Exe string
	// Args are its arguments, if it needs any.
	Args []string
}

// sandboxEnv is the environment variable that makes a program a render
// child.
const sandboxEnv = "WEIR_JINJA_SANDBOX_CHILD"

// IsSandboxChild says whether this process was started by a Sandbox: a
// program that serves sandboxed renders calls it first thing in main and,
// when it is true, exits with ServeSandbox's code.
func IsSandboxChild() bool { return os.Getenv(sandboxEnv) == "1" }

// sandboxRequest is what the parent sends the child, as JSON on its
// standard input.
type sandboxRequest struct {
	File    string          `json:"file"`
	Src     string          `json:"src"`
	Vars    json.RawMessage `json:"vars"`
	Inline  bool            `json:"inline"`
	Limits  Limits          `json:"limits"`
	BaseDir string          `json:"base_dir"`
}

// sandboxReply is what the child answers, as JSON on its standard output.
type sandboxReply struct {
	Out   string      `json:"out"`
	Err   *Error      `json:"err,omitempty"`
	Limit *LimitError `json:"limit,omitempty"`
}

// render renders in a child process.
func (sb *Sandbox) render(ctx context.Context, filename string, src []byte, opts Options) ([]byte, error) {
	vars, err := encodeVars(opts.Vars)
	if err != nil {
		return nil, &Error{File: filename, Line: 1, Col: 1, Err: err, Msg: fmt.Sprintf("Jinja: the variables cannot be sent to the renderer: %v", err)}
	}
	base := opts.BaseDir
	if base == "" {
		base = "."
	}
	if base, err = filepath.Abs(base); err != nil {
		return nil, fmt.Errorf("the template's base directory: %w", err)
	}
	req, err := json.Marshal(sandboxRequest{File: filename, Src: string(src), Vars: vars, Inline: opts.Inline, Limits: opts.Limits, BaseDir: base})
	if err != nil {
		return nil, fmt.Errorf("encoding the render request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Limits.Time)
	defer cancel()
	cmd := exec.CommandContext(ctx, sb.Exe, sb.Args...)
	cmd.Env = append(os.Environ(), sandboxEnv+"=1")
	cmd.Stdin = bytes.NewReader(req)
	var stdout bytes.Buffer
	stderr := &capped{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	runErr := cmd.Run()
	timeErr := &LimitError{Limit: "jinja_time", Value: opts.Limits.Time.String()}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && ctx.Err() != nil && runErr != nil:
		return nil, budgetError(filename, timeErr, "the template renders for too long")
	case runErr != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("rendering %s: %w", filename, ctx.Err())
	case runErr != nil:
		text := stderr.String()
		if strings.Contains(text, "out of memory") || strings.Contains(text, "stack exceeds") || strings.Contains(text, "cannot allocate memory") {
			le := &LimitError{Limit: "jinja_memory", Value: strconv.FormatInt(opts.Limits.MemoryBytes>>20, 10) + " MiB"}
			return nil, budgetError(filename, le, "the template needs too much memory to render")
		}
		if strings.Contains(text, "CPU time limit") {
			return nil, budgetError(filename, timeErr, "the template renders for too long")
		}
		first, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
		return nil, &Error{File: filename, Line: 1, Col: 1, Err: runErr, Msg: fmt.Sprintf("Jinja: the renderer failed (%v): %s", runErr, first)}
	}
	var rep sandboxReply
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return nil, &Error{File: filename, Line: 1, Col: 1, Err: err, Msg: fmt.Sprintf("Jinja: the renderer's answer cannot be read: %v", err)}
	}
	if rep.Err != nil {
		if rep.Limit != nil {
			rep.Err.Err = rep.Limit
		}
		return nil, rep.Err
	}
	return []byte(rep.Out), nil
}

// ServeSandbox is the child's side of a Sandbox: it reads one render
// request from in, limits its own memory and CPU time to the request's
// budgets, renders, writes the reply to out and returns the exit code.
func ServeSandbox(in io.Reader, out io.Writer) int {
	var req sandboxRequest
	if err := json.NewDecoder(in).Decode(&req); err != nil {
		fmt.Fprintf(os.Stderr, "weir render sandbox: reading the request: %v\n", err)
		return 2
	}
	if err := limitSelf(req.Limits); err != nil {
		fmt.Fprintf(os.Stderr, "weir render sandbox: %v\n", err)
		return 2
	}
	var vars map[string]any
	if len(req.Vars) > 0 && string(req.Vars) != "null" {
		dec := jsonDecoder(string(req.Vars))
		if err := dec.Decode(&vars); err != nil {
			fmt.Fprintf(os.Stderr, "weir render sandbox: reading the variables: %v\n", err)
			return 2
		}
		vars = normalizeVars(vars)
	}
	var rep sandboxReply
	s, err := render(req.File, []byte(req.Src), Options{Vars: vars, Inline: req.Inline, Limits: req.Limits, BaseDir: req.BaseDir})
	switch {
	case err == nil:
		rep.Out = string(s)
	default:
		var je *Error
		if !errors.As(err, &je) {
			je = &Error{File: req.File, Line: 1, Col: 1, Msg: err.Error()}
		}
		rep.Err = je
		var le *LimitError
		if errors.As(err, &le) {
			rep.Limit = le
		}
	}
	if err := json.NewEncoder(out).Encode(rep); err != nil {
		fmt.Fprintf(os.Stderr, "weir render sandbox: writing the reply: %v\n", err)
		return 2
	}
	return 0
}

// limitSelf limits this process's address space to what it has mapped
// now plus l.MemoryBytes, its stack to the same, and its CPU time to
// l.Time (rounded up, plus a second: the parent's wall-clock limit is the
// one that normally acts).
func limitSelf(l Limits) error {
	vm, err := mappedBytes()
	if err != nil {
		return err
	}
	as := uint64(vm + l.MemoryBytes)
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: as, Max: as}); err != nil {
		return fmt.Errorf("limiting the address space: %w", err)
	}
	debug.SetMaxStack(int(min(l.MemoryBytes, math.MaxInt32)))
	cpu := uint64(l.Time/time.Second) + 2
	if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: cpu, Max: cpu}); err != nil {
		return fmt.Errorf("limiting the CPU time: %w", err)
	}
	return nil
}

// mappedBytes is this process's virtual memory size (VmSize).
func mappedBytes() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("reading the process's memory size: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmSize:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("reading the process's memory size %q: %w", line, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("the process's memory size is not in /proc/self/status")
}

// encodeVars encodes variables as JSON that ParseVariables reads back to
// the same values: an integral float keeps a decimal point, so it stays a
// float.
func encodeVars(vars map[string]any) (json.RawMessage, error) {
	var conv func(v any) any
	conv = func(v any) any {
		switch x := v.(type) {
		case float64:
			s := strconv.FormatFloat(x, 'g', -1, 64)
			if !strings.ContainsAny(s, ".eEIN") {
				s += ".0"
			}
			return json.Number(s)
		case map[string]any:
			m := make(map[string]any, len(x))
			for k, e := range x {
				m[k] = conv(e)
			}
			return m
		case []any:
			l := make([]any, len(x))
			for i, e := range x {
				l[i] = conv(e)
			}
			return l
		}
		return v
	}
	if vars == nil {
		return json.RawMessage("null"), nil
	}
	return json.Marshal(conv(vars))
}

// capped keeps the first max bytes written to it.
type capped struct {
	max int
	buf bytes.Buffer
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *capped) String() string { return c.buf.String() }
