// Package serviceopt parses and checks the service options of a job
// submission (`weir run --service-options K[=V]`, the API's
// service_options): Dataflow's keys accepted verbatim
// (update_strategy_parallel_job_update, parallel_replace_job_name=, ...)
// plus weir's own weir_replace_rewind= and the parity gate's
// weir_cutover_gate=, weir_parity_budget=, weir_parity_windows= and
// weir_parity_deadline=. It is the one place that states
// which keys exist, what values they take and which combinations make a
// request: the CLI uses it to refuse a bad command line before anything is
// sent, and the job service uses it again because the API accepts options
// from any client.
//
// Every refusal is an *Error with a stable code from package errcode and a
// sentence that says what to change.
//
// It may import duration, errcode and the standard library.
package serviceopt

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weir-dev/weir/duration"
	"github.com/weir-dev/weir/errcode"
)

// The option keys, verbatim from Dataflow, and weir's own.
const (
	// KeyParallelUpdate asks an update (--update) to replace the job by a
	// new one instead of in place: stop-and-replace or parallel.
	KeyParallelUpdate = "update_strategy_parallel_job_update"
	// KeyInPlaceUpdate asks for the in-place update (the default of
	// --update); the parallel options are then ignored.
	KeyInPlaceUpdate = "update_strategy_in_place_update"
	// KeyReplaceJobName names the job that a job of a new name replaces.
	KeyReplaceJobName = "parallel_replace_job_name"
	// KeyReplaceJobID names, by ID, the job that a job of a new name replaces.
	KeyReplaceJobID = "parallel_replace_job_id"
	// KeyMinParallel is how long old and new job run side by side
	// (parallel replacement), 0s..744h.
	KeyMinParallel = "parallel_replace_job_min_parallel_pipelines_duration"
	// KeyMaxStop bounds the old job's drain.
	KeyMaxStop = "parallel_replace_job_max_stop_duration"
	// KeyCancelOnDrainTimeout: cancel the old job when its drain takes
	// longer than the maximum stop duration (default true).
	KeyCancelOnDrainTimeout = "parallel_replace_job_cancel_on_drain_timeout"
	// KeyPreallocate: build the new job while the old one still runs
	// (default true); false builds it only after the old one stopped.
	KeyPreallocate = "parallel_replace_job_preallocate_compute_resources"
	// KeyCreateOrUpdate: update the running job of the name if there is
	// one, else create a new job.
	KeyCreateOrUpdate = "create_or_update_job"
	// KeyRewind (weir's own): the replacement re-reads retained input from
	// the earliest message that contributed to the old job's open windows
	// (default true); false continues from the old job's position.
	KeyRewind = "weir_replace_rewind"
	// KeyCutoverGate (weir's own) says what ends a parallel replacement's
	// overlap: timer (the default: min_parallel_pipelines_duration and the
	// cut-over watermark) or parity (also the old and new jobs' SQL
	// outputs agree on KeyParityWindows consecutive complete windows).
	KeyCutoverGate = "weir_cutover_gate"
	// KeyParityBudget (weir's own) is how many differing rows the parity
	// gate tolerates over the compared windows (default 0).
	KeyParityBudget = "weir_parity_budget"
	// KeyParityWindows (weir's own) is how many consecutive complete
	// windows must agree before the parity gate passes (default 3).
	KeyParityWindows = "weir_parity_windows"
	// KeyParityDeadline (weir's own) bounds the parity gate: a gate that
	// has not passed that long after the overlap began aborts the
	// replacement, keeping the old job (default 30m).
	KeyParityDeadline = "weir_parity_deadline"
	// KeyRehearse (weir's own): weir_rehearse=required[;since=D] makes a
	// stop-and-replace or in-place update rehearse the new pipeline
	// against the running one on the job's retained input of the last D
	// (default DefaultRehearseSince) first, and refuse the change when
	// their outputs differ beyond weir_parity_budget.
	KeyRehearse = "weir_rehearse"
)

// DefaultRehearseSince is how far back a pre-flight rehearsal reads the
// job's retained input by default.
const DefaultRehearseSince = 30 * time.Minute

// The values of KeyCutoverGate.
const (
	// GateTimer ends the overlap on min_parallel_pipelines_duration and
	// the cut-over watermark alone.
	GateTimer = "timer"
	// GateParity also waits for the jobs' outputs to agree.
	GateParity = "parity"
)

// The parity gate's defaults and bounds.
const (
	DefaultParityWindows  = 3
	DefaultParityDeadline = 30 * time.Minute
	// MaxParityWindows bounds KeyParityWindows.
	MaxParityWindows = 10000
)

// MaxParallelDuration is the longest accepted duration of KeyMinParallel
// (and of KeyMaxStop): 31 days, Dataflow's bound.
const MaxParallelDuration = 744 * time.Hour

// key describes one option key.
type key struct {
	name  string
	value valueKind
}

type valueKind int

const (
	noValue valueKind = iota
	boolValue
	durationValue
	jobNameValue
	jobIDValue
	gateValue
	countValue
	rehearseValue
)

// keys lists every known key in the order Known prints them.
func keys() []key {
	return []key{
		{KeyParallelUpdate, noValue},
		{KeyInPlaceUpdate, noValue},
		{KeyReplaceJobName, jobNameValue},
		{KeyReplaceJobID, jobIDValue},
		{KeyMinParallel, durationValue},
		{KeyMaxStop, durationValue},
		{KeyCancelOnDrainTimeout, boolValue},
		{KeyPreallocate, boolValue},
		{KeyCreateOrUpdate, noValue},
		{KeyRewind, boolValue},
		{KeyCutoverGate, gateValue},
		{KeyParityBudget, countValue},
		{KeyParityWindows, countValue},
		{KeyParityDeadline, durationValue},
		{KeyRehearse, rehearseValue},
	}
}

// Known returns the known keys; those that take a value end with '='.
func Known() []string {
	var out []string
	for _, k := range keys() {
		if k.value == noValue {
			out = append(out, k.name)
		} else {
			out = append(out, k.name+"=")
		}
	}
	return out
}

// Error is a refused option or combination of options: a stable code
// (UNKNOWN_SERVICE_OPTION, INVALID_SERVICE_OPTION,
// CONFLICTING_SERVICE_OPTIONS) and a message that says what to change.
type Error struct {
	Code    errcode.Code
	Message string
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

func errorf(code errcode.Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Options are parsed service options. Unset values are nil (or false, or
// "").
type Options struct {
	ParallelUpdate       bool
	InPlaceUpdate        bool
	CreateOrUpdate       bool
	ReplaceJobName       string
	ReplaceJobID         string
	MinParallel          *time.Duration
	MaxStop              *time.Duration
	CancelOnDrainTimeout *bool
	Preallocate          *bool
	Rewind               *bool
	// CutoverGate is KeyCutoverGate's value (GateTimer or GateParity).
	CutoverGate    string
	ParityBudget   *int64
	ParityWindows  *int64
	ParityDeadline *time.Duration
	// RehearseSince is set by weir_rehearse=required (its since, or
	// DefaultRehearseSince).
	RehearseSince *time.Duration
	// Given lists the keys given, in order, without values.
	Given []string
}

// jobNameRE is Dataflow's rule for job names (as service.ValidateJobName).
var jobNameRE = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// jobIDRE is the form of weir job IDs (2026-11-30_01_51_02-3f9a0c1d).
var jobIDRE = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}_[0-9]{2}_[0-9]{2}_[0-9]{2}-[0-9a-f]{8}$`)

// Split splits the values of repeated --service-options flags, each of
// which may hold several options separated by commas, into single
// options; empty items are dropped.
func Split(values []string) []string {
	var out []string
	for _, v := range values {
		for _, o := range strings.Split(v, ",") {
			if o = strings.TrimSpace(o); o != "" {
				out = append(out, o)
			}
		}
	}
	return out
}

// Parse parses service options (each "KEY" or "KEY=VALUE"; values of
// repeated flags may be comma-separated, see Split). An unknown key is
// UNKNOWN_SERVICE_OPTION with the list of known keys; a missing,
// unexpected or malformed value, or a key given twice with different
// values, is INVALID_SERVICE_OPTION.
func Parse(values []string) (Options, error) {
	var o Options
	seen := map[string]string{}
	for _, opt := range Split(values) {
		name, val, hasValue := strings.Cut(opt, "=")
		i := slices.IndexFunc(keys(), func(k key) bool { return k.name == name })
		if i < 0 {
			return Options{}, errorf(errcode.UnknownServiceOption, "service option %q is unknown (known: %s)", opt, strings.Join(Known(), ", "))
		}
		k := keys()[i]
		if prev, dup := seen[name]; dup {
			if prev != val {
				return Options{}, errorf(errcode.InvalidServiceOption, "service option %s is given twice with different values (%q and %q): give it once", name, prev, val)
			}
			continue
		}
		seen[name] = val
		o.Given = append(o.Given, name)
		if k.value == noValue {
			if hasValue {
				return Options{}, errorf(errcode.InvalidServiceOption, "service option %q: %s takes no value (write just %s)", opt, name, name)
			}
			switch name {
			case KeyParallelUpdate:
				o.ParallelUpdate = true
			case KeyInPlaceUpdate:
				o.InPlaceUpdate = true
			case KeyCreateOrUpdate:
				o.CreateOrUpdate = true
			}
			continue
		}
		if !hasValue || val == "" {
			return Options{}, errorf(errcode.InvalidServiceOption, "service option %q: %s needs a value (%s=%s)", opt, name, name, placeholder(k.value))
		}
		switch k.value {
		case boolValue:
			b, err := parseBool(val)
			if err != nil {
				return Options{}, errorf(errcode.InvalidServiceOption, "service option %q: %s is a boolean: write %s=true or %s=false", opt, name, name, name)
			}
			switch name {
			case KeyCancelOnDrainTimeout:
				o.CancelOnDrainTimeout = &b
			case KeyPreallocate:
				o.Preallocate = &b
			case KeyRewind:
				o.Rewind = &b
			}
		case durationValue:
			d, err := duration.Parse(val)
			if err != nil {
				return Options{}, errorf(errcode.InvalidServiceOption, "service option %q: %v", opt, err)
			}
			if d > MaxParallelDuration {
				return Options{}, errorf(errcode.InvalidServiceOption, "service option %q: %s must be between 0s and 744h (31 days), got %s", opt, name, duration.Format(d))
			}
			switch name {
			case KeyMinParallel:
				o.MinParallel = &d
			case KeyParityDeadline:
				if d <= 0 {
					return Options{}, errorf(errcode.InvalidServiceOption, "service option %q: %s must be longer than 0s (the gate needs time to compare windows)", opt, name)
				}
				o.ParityDeadline = &d
			default:
				o.MaxStop = &d
			}
		case jobNameValue:
			if !jobNameRE.MatchString(val) || len(val) > 63 {
				return Options{}, errorf(errcode.InvalidServiceOption, "service option %q: %q is not a job name ([a-z]([-a-z0-9]*[a-z0-9])?, at most 63 characters)", opt, val)
			}
			o.ReplaceJobName = val
		case jobIDValue:
			if !jobIDRE.MatchString(val) {
				return Options{}, errorf(errcode.InvalidServiceOption, "service option %q: %q is not a job ID (like 2026-11-30_01_51_02-3f9a0c1d; 'weir jobs list' shows them)", opt, val)
			}
			o.ReplaceJobID = val
		case gateValue:
			if val != GateTimer && val != GateParity {
				return Options{}, errorf(errcode.InvalidServiceOption, "service option %q: %s is %s or %s", opt, name, GateTimer, GateParity)
			}
			o.CutoverGate = val
		case rehearseValue:
			d, err := parseRehearse(val)
			if err != nil {
				return Options{}, errorf(errcode.InvalidServiceOption, "service option %q: %v", opt, err)
			}
			o.RehearseSince = &d
		case countValue:
			n, err := strconv.ParseInt(val, 10, 64)
			lo := int64(0)
			if name == KeyParityWindows {
				lo = 1
			}
			if err != nil || n < lo || n > MaxParityWindows && name == KeyParityWindows {
				hi := ""
				if name == KeyParityWindows {
					hi = fmt.Sprintf(" and at most %d", MaxParityWindows)
				}
				return Options{}, errorf(errcode.InvalidServiceOption, "service option %q: %s is a whole number of at least %d%s", opt, name, lo, hi)
			}
			if name == KeyParityWindows {
				o.ParityWindows = &n
			} else {
				o.ParityBudget = &n
			}
		}
	}
	return o, nil
}

func placeholder(v valueKind) string {
	switch v {
	case boolValue:
		return "true|false"
	case durationValue:
		return "DURATION, e.g. 5m"
	case jobNameValue:
		return "JOB_NAME"
	case jobIDValue:
		return "JOB_ID"
	case gateValue:
		return GateTimer + "|" + GateParity
	case countValue:
		return "N"
	case rehearseValue:
		return "required[;since=DURATION]"
	}
	return "VALUE"
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%q is not true or false", v)
}

// Strategy is how a request changes the jobs of a name.
type Strategy string

// Strategies.
const (
	// StrategyCreate: a new job (no job is replaced).
	StrategyCreate Strategy = "create"
	// StrategyInPlace: Dataflow's in-place update (state handed over).
	StrategyInPlace Strategy = "in_place"
	// StrategyStopAndReplace: the old job drains, then the new one starts.
	StrategyStopAndReplace Strategy = "stop_and_replace"
	// StrategyParallel: both run for the overlap, then the old one drains.
	StrategyParallel Strategy = "parallel"
)

// AsUpdate and AsNewJob are how refusals tell a client to submit a
// request as an update or as a new job, naming the CLI's and the HTTP
// API's way, since both clients get the same message.
const (
	AsUpdate = "submit it as an update (weir run --update, or POST /v1/jobs:update)"
	AsNewJob = "submit it as a new job (weir run without --update, or POST /v1/jobs)"
)

// Plan is what a request's options, together with --update, ask for.
type Plan struct {
	Strategy Strategy
	// CreateOrUpdate: Strategy applies when the name has a running or
	// draining job; otherwise the request creates a new job.
	CreateOrUpdate bool
	// ReplaceJobName or ReplaceJobID name the replaced job of another name
	// (option 2); both empty for a same-name replacement (option 1).
	ReplaceJobName string
	ReplaceJobID   string
	// MinParallel is the overlap of a parallel replacement.
	MinParallel time.Duration
	// MaxStop bounds the old job's drain; HasMaxStop says whether it was
	// given (a parallel replacement without it waits for the drain).
	MaxStop    time.Duration
	HasMaxStop bool
	// CancelOnDrainTimeout, Preallocate and Rewind default to true.
	CancelOnDrainTimeout bool
	Preallocate          bool
	Rewind               bool
	// Gate is the parallel replacement's cut-over gate: GateTimer or
	// GateParity (KeyCutoverGate); the parity gate's figures follow.
	Gate           string
	ParityBudget   int64
	ParityWindows  int64
	ParityDeadline time.Duration
	// Rehearse asks for a pre-flight rehearsal (weir_rehearse=required)
	// of a stop-and-replace or in-place update on the job's input retained
	// over the last RehearseSince.
	Rehearse      bool
	RehearseSince time.Duration
	// Notes are what the request ignores, worded for the user.
	Notes []string
}

// Replacement reports whether the plan replaces a job by a new one
// (stop-and-replace or parallel).
func (p Plan) Replacement() bool {
	return p.Strategy == StrategyStopAndReplace || p.Strategy == StrategyParallel
}

// SameName reports whether the plan replaces the running job of the
// request's own name (option 1, or create-or-update).
func (p Plan) SameName() bool { return p.ReplaceJobName == "" && p.ReplaceJobID == "" }

// replacementKeys are the keys that only a stop-and-replace or parallel
// replacement uses.
func replacementKeys() []string {
	return []string{KeyReplaceJobName, KeyReplaceJobID, KeyMinParallel, KeyMaxStop, KeyCancelOnDrainTimeout, KeyPreallocate, KeyRewind,
		KeyCutoverGate, KeyParityBudget, KeyParityWindows, KeyParityDeadline}
}

// Resolve checks every rule about how the options combine with each other,
// with jobName (--job-name) and with update (--update), and returns the
// plan. A combination that cannot work is CONFLICTING_SERVICE_OPTIONS.
//
// One rule depends on the server's jobs: a new name (parallel_replace_job_*)
// with --update. Resolve refuses it as CONFLICTING_SERVICE_OPTIONS when
// newNameRunning is nil or says jobName has a running job, and as
// NO_RUNNING_JOB ("no running job named NEW") when it says there is none.
func (o Options) Resolve(jobName string, update bool, newNameRunning func(name string) bool) (Plan, error) {
	p := Plan{Strategy: StrategyCreate, CreateOrUpdate: o.CreateOrUpdate, ReplaceJobName: o.ReplaceJobName,
		ReplaceJobID: o.ReplaceJobID, CancelOnDrainTimeout: true, Preallocate: true, Rewind: true,
		Gate: GateTimer, ParityWindows: DefaultParityWindows, ParityDeadline: DefaultParityDeadline}
	conflict := func(format string, args ...any) (Plan, error) {
		return Plan{}, errorf(errcode.ConflictingServiceOptions, format, args...)
	}
	newName := o.ReplaceJobName != "" || o.ReplaceJobID != ""
	// The refusals reach both CLI and HTTP API clients, so they name
	// both ways of submitting.
	if o.InPlaceUpdate && o.ParallelUpdate {
		return conflict("service options %s and %s ask for two update strategies: give one", KeyInPlaceUpdate, KeyParallelUpdate)
	}
	if o.ReplaceJobName != "" && o.ReplaceJobID != "" {
		return conflict("service options %s and %s both name the job to replace: give one", KeyReplaceJobName, KeyReplaceJobID)
	}
	if o.CreateOrUpdate && newName {
		return conflict("service option %s updates the job of --job-name %s, while %s replaces another job under a new name: give one of them", KeyCreateOrUpdate, jobName, givenNewNameKey(o))
	}
	if o.ReplaceJobName != "" && o.ReplaceJobName == jobName {
		return conflict("service option %s=%s names the job itself: to replace a job under the same name, %s with %s", KeyReplaceJobName, jobName, AsUpdate, KeyParallelUpdate)
	}
	if newName && update {
		if newNameRunning != nil && !newNameRunning(jobName) {
			return Plan{}, errorf(errcode.NoRunningJob, "no running job named %s: %s replaces a job under the new name %s, so %s", jobName, givenNewNameKey(o), jobName, AsNewJob)
		}
		return conflict("service option %s replaces a job under a new name and does not go with an update: %s (or, to replace job %s under its own name, drop %s and add %s)", givenNewNameKey(o), AsNewJob, jobName, givenNewNameKey(o), KeyParallelUpdate)
	}
	updating := update || o.CreateOrUpdate
	if o.InPlaceUpdate {
		if !updating {
			return conflict("service option %s is an update strategy: %s (or add %s)", KeyInPlaceUpdate, AsUpdate, KeyCreateOrUpdate)
		}
		p.Strategy = StrategyInPlace
		p.ReplaceJobName, p.ReplaceJobID = "", ""
		if err := p.resolveRehearse(o); err != nil {
			return Plan{}, err
		}
		var ignored []string
		for _, k := range o.Given {
			if slices.Contains(replacementKeys(), k) && !(k == KeyParityBudget && p.Rehearse) {
				ignored = append(ignored, k)
			}
		}
		if len(ignored) > 0 {
			p.Notes = append(p.Notes, fmt.Sprintf("%s: the in-place update ignores %s", KeyInPlaceUpdate, strings.Join(ignored, ", ")))
		}
		return p, nil
	}
	replacing := newName || o.ParallelUpdate && updating
	if o.ParallelUpdate && !updating && !newName {
		return conflict("service option %s is an update strategy: to replace the running job of %s, %s (or add %s)", KeyParallelUpdate, jobName, AsUpdate, KeyCreateOrUpdate)
	}
	if !replacing {
		for _, k := range o.Given {
			if slices.Contains(replacementKeys(), k) && !(k == KeyParityBudget && o.RehearseSince != nil) {
				if updating {
					return conflict("service option %s applies to a replacement job: add %s (or %s to update in place without it)", k, KeyParallelUpdate, KeyInPlaceUpdate)
				}
				return conflict("service option %s applies to a replacement job: to replace the job of %s, %s with %s, or add %s=OLD to replace job OLD under this name", k, jobName, AsUpdate, KeyParallelUpdate, KeyReplaceJobName)
			}
		}
		if updating {
			p.Strategy = StrategyInPlace
		}
		if o.RehearseSince != nil && !updating {
			return conflict("service option %s rehearses an update before it changes the running job: %s", KeyRehearse, AsUpdate)
		}
		if err := p.resolveRehearse(o); err != nil {
			return Plan{}, err
		}
		return p, nil
	}
	switch {
	case o.MinParallel != nil:
		p.Strategy = StrategyParallel
		p.MinParallel = *o.MinParallel
	case o.MaxStop != nil:
		p.Strategy = StrategyStopAndReplace
	default:
		return conflict("a replacement job needs %s=D (parallel replacement: both jobs run for D) or %s=D (stop-and-replace: the old job drains for at most D, then the new one starts)", KeyMinParallel, KeyMaxStop)
	}
	if o.MaxStop != nil {
		p.MaxStop, p.HasMaxStop = *o.MaxStop, true
	}
	if o.CancelOnDrainTimeout != nil {
		p.CancelOnDrainTimeout = *o.CancelOnDrainTimeout
	}
	if o.Preallocate != nil {
		p.Preallocate = *o.Preallocate
	}
	if o.Rewind != nil {
		p.Rewind = *o.Rewind
	}
	return p.resolveGate(o)
}

// resolveGate adds the cut-over gate's options to a replacement plan: the
// parity gate only ends a parallel replacement's overlap, and its figures
// only go with it.
func (p Plan) resolveGate(o Options) (Plan, error) {
	if o.CutoverGate != "" {
		p.Gate = o.CutoverGate
	}
	if o.RehearseSince != nil && p.Strategy == StrategyParallel {
		return Plan{}, errorf(errcode.ConflictingServiceOptions, "service option %s rehearses a stop-and-replace or in-place update before it changes anything; a parallel replacement compares the jobs during its overlap instead: use %s=%s", KeyRehearse, KeyCutoverGate, GateParity)
	}
	if err := p.resolveRehearse(o); err != nil {
		return Plan{}, err
	}
	if p.Gate == GateParity && p.Strategy != StrategyParallel {
		return Plan{}, errorf(errcode.ConflictingServiceOptions, "service option %s=%s gates the end of a parallel replacement's overlap, and this request is a stop-and-replace: add %s=D to run both jobs side by side", KeyCutoverGate, GateParity, KeyMinParallel)
	}
	for _, k := range []string{KeyParityBudget, KeyParityWindows, KeyParityDeadline} {
		if k == KeyParityBudget && p.Rehearse {
			continue // the rehearsal's budget
		}
		if slices.Contains(o.Given, k) && p.Gate != GateParity {
			return Plan{}, errorf(errcode.ConflictingServiceOptions, "service option %s applies to the parity gate: add %s=%s", k, KeyCutoverGate, GateParity)
		}
	}
	if o.ParityBudget != nil {
		p.ParityBudget = *o.ParityBudget
	}
	if o.ParityWindows != nil {
		p.ParityWindows = *o.ParityWindows
	}
	if o.ParityDeadline != nil {
		p.ParityDeadline = *o.ParityDeadline
	}
	return p, nil
}

func givenNewNameKey(o Options) string {
	if o.ReplaceJobID != "" {
		return KeyReplaceJobID + "=" + o.ReplaceJobID
	}
	return KeyReplaceJobName + "=" + o.ReplaceJobName
}

// resolveRehearse adds weir_rehearse to the plan, with the budget it
// shares with the parity gate.
func (p *Plan) resolveRehearse(o Options) error {
	if o.RehearseSince == nil {
		if p.Strategy == StrategyInPlace && slices.Contains(o.Given, KeyParityBudget) {
			return errorf(errcode.ConflictingServiceOptions, "service option %s applies to the parity gate or to %s=required: add one of them", KeyParityBudget, KeyRehearse)
		}
		return nil
	}
	p.Rehearse, p.RehearseSince = true, *o.RehearseSince
	if o.ParityBudget != nil {
		p.ParityBudget = *o.ParityBudget
	}
	return nil
}

// parseRehearse reads weir_rehearse's value: required, or
// required;since=DURATION (the stretch of retained input, at most 744h).
func parseRehearse(v string) (time.Duration, error) {
	head, rest, _ := strings.Cut(v, ";")
	if head != "required" {
		return 0, fmt.Errorf("%s is required or required;since=DURATION (e.g. required;since=30m)", KeyRehearse)
	}
	if rest == "" {
		return DefaultRehearseSince, nil
	}
	k, d, ok := strings.Cut(rest, "=")
	if !ok || k != "since" {
		return 0, fmt.Errorf("%s: after required; only since=DURATION may follow (e.g. required;since=30m)", KeyRehearse)
	}
	since, err := duration.Parse(d)
	if err != nil {
		return 0, fmt.Errorf("%s: since: %w", KeyRehearse, err)
	}
	if since <= 0 || since > MaxParallelDuration {
		return 0, fmt.Errorf("%s: since must be longer than 0s and at most 744h, got %s", KeyRehearse, duration.Format(since))
	}
	return since, nil
}

// ParseAndResolve is Parse followed by Resolve.
func ParseAndResolve(values []string, jobName string, update bool, newNameRunning func(string) bool) (Plan, error) {
	o, err := Parse(values)
	if err != nil {
		return Plan{}, err
	}
	return o.Resolve(jobName, update, newNameRunning)
}
