package serviceopt

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/errcode"
)

func TestSplit(t *testing.T) {
	got := Split([]string{"a,b", "c", " d , ,e"})
	want := []string{"a", "b", "c", "d", "e"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Split = %q, want %q", got, want)
	}
}

// TestParse: every key with its value forms, and every malformed option
// refused with its code and a message naming the fix.
func TestParse(t *testing.T) {
	d := func(v time.Duration) *time.Duration { return &v }
	b := func(v bool) *bool { return &v }
	tests := []struct {
		name string
		in   []string
		want Options
		code errcode.Code
		msg  string
	}{
		{name: "empty", in: nil, want: Options{}},
		{name: "flags", in: []string{KeyParallelUpdate + "," + KeyCreateOrUpdate}, want: Options{ParallelUpdate: true, CreateOrUpdate: true, Given: []string{KeyParallelUpdate, KeyCreateOrUpdate}}},
		{name: "in place", in: []string{KeyInPlaceUpdate}, want: Options{InPlaceUpdate: true, Given: []string{KeyInPlaceUpdate}}},
		{name: "values", in: []string{KeyMinParallel + "=0s", KeyMaxStop + "=1.5h," + KeyCancelOnDrainTimeout + "=false", KeyPreallocate + "=TRUE", KeyRewind + "=false", KeyReplaceJobName + "=old-job"},
			want: Options{MinParallel: d(0), MaxStop: d(90 * time.Minute), CancelOnDrainTimeout: b(false), Preallocate: b(true), Rewind: b(false), ReplaceJobName: "old-job",
				Given: []string{KeyMinParallel, KeyMaxStop, KeyCancelOnDrainTimeout, KeyPreallocate, KeyRewind, KeyReplaceJobName}}},
		{name: "job id", in: []string{KeyReplaceJobID + "=2026-11-30_01_51_02-3f9a0c1d"}, want: Options{ReplaceJobID: "2026-11-30_01_51_02-3f9a0c1d", Given: []string{KeyReplaceJobID}}},
		{name: "repeated same", in: []string{KeyMaxStop + "=5m", KeyMaxStop + "=5m"}, want: Options{MaxStop: d(5 * time.Minute), Given: []string{KeyMaxStop}}},
		{name: "max parallel", in: []string{KeyMinParallel + "=744h"}, want: Options{MinParallel: d(744 * time.Hour), Given: []string{KeyMinParallel}}},
		{name: "unknown", in: []string{"streaming_mode_at_least_once"}, code: errcode.UnknownServiceOption, msg: "known: update_strategy_parallel_job_update"},
		{name: "unknown lists rewind", in: []string{"nope=1"}, code: errcode.UnknownServiceOption, msg: "weir_replace_rewind="},
		{name: "flag with value", in: []string{KeyParallelUpdate + "=true"}, code: errcode.InvalidServiceOption, msg: "takes no value"},
		{name: "missing value", in: []string{KeyMaxStop}, code: errcode.InvalidServiceOption, msg: "needs a value"},
		{name: "empty value", in: []string{KeyReplaceJobName + "="}, code: errcode.InvalidServiceOption, msg: "needs a value"},
		{name: "bad bool", in: []string{KeyCancelOnDrainTimeout + "=yes"}, code: errcode.InvalidServiceOption, msg: "is a boolean"},
		{name: "bad duration", in: []string{KeyMaxStop + "=5"}, code: errcode.InvalidServiceOption, msg: "needs a unit"},
		{name: "negative duration", in: []string{KeyMinParallel + "=-1s"}, code: errcode.InvalidServiceOption, msg: "not a number"},
		{name: "too long", in: []string{KeyMinParallel + "=745h"}, code: errcode.InvalidServiceOption, msg: "between 0s and 744h"},
		{name: "bad name", in: []string{KeyReplaceJobName + "=Old_Job"}, code: errcode.InvalidServiceOption, msg: "is not a job name"},
		{name: "bad id", in: []string{KeyReplaceJobID + "=old"}, code: errcode.InvalidServiceOption, msg: "is not a job ID"},
		{name: "bad gate", in: []string{KeyCutoverGate + "=evidence"}, code: errcode.InvalidServiceOption, msg: "weir_cutover_gate is timer or parity"},
		{name: "negative budget", in: []string{KeyParityBudget + "=-1"}, code: errcode.InvalidServiceOption, msg: "whole number of at least 0"},
		{name: "zero windows", in: []string{KeyParityWindows + "=0"}, code: errcode.InvalidServiceOption, msg: "whole number of at least 1 and at most 10000"},
		{name: "zero deadline", in: []string{KeyParityDeadline + "=0s"}, code: errcode.InvalidServiceOption, msg: "longer than 0s"},
		{name: "rehearse optional", in: []string{KeyRehearse + "=optional"}, code: errcode.InvalidServiceOption, msg: "weir_rehearse is required or required;since=DURATION"},
		{name: "rehearse other key", in: []string{KeyRehearse + "=required;until=5m"}, code: errcode.InvalidServiceOption, msg: "only since=DURATION"},
		{name: "rehearse bad since", in: []string{KeyRehearse + "=required;since=0s"}, code: errcode.InvalidServiceOption, msg: "longer than 0s"},
		{name: "twice different", in: []string{KeyMaxStop + "=5m", KeyMaxStop + "=6m"}, code: errcode.InvalidServiceOption, msg: "given twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if tc.code != "" {
				var e *Error
				if !errors.As(err, &e) || e.Code != tc.code || !strings.Contains(e.Message, tc.msg) {
					t.Fatalf("Parse(%q) = %v, want %s containing %q", tc.in, err, tc.code, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.in, err)
			}
			if g, w := describe(got), describe(tc.want); g != w {
				t.Errorf("Parse(%q) = %s, want %s", tc.in, g, w)
			}
		})
	}
}

func describe(o Options) string {
	var b strings.Builder
	p := func(name string, v any) {
		b.WriteString(name + "=" + strings.TrimSpace(strings.ReplaceAll(fmtAny(v), "\n", "")) + " ")
	}
	p("par", o.ParallelUpdate)
	p("inplace", o.InPlaceUpdate)
	p("cou", o.CreateOrUpdate)
	p("name", o.ReplaceJobName)
	p("id", o.ReplaceJobID)
	p("min", o.MinParallel)
	p("max", o.MaxStop)
	p("cancel", o.CancelOnDrainTimeout)
	p("pre", o.Preallocate)
	p("rewind", o.Rewind)
	p("given", strings.Join(o.Given, ","))
	return b.String()
}

func fmtAny(v any) string {
	switch x := v.(type) {
	case *time.Duration:
		if x == nil {
			return "nil"
		}
		return x.String()
	case *bool:
		if x == nil {
			return "nil"
		}
		if *x {
			return "true"
		}
		return "false"
	case bool:
		if x {
			return "true"
		}
		return "false"
	case string:
		return x
	}
	return "?"
}

// TestResolve: every combination rule of issue 10 item 1, each refusal
// with its code and the sentence that says what to change.
func TestResolve(t *testing.T) {
	running := func(names ...string) func(string) bool {
		return func(n string) bool {
			for _, m := range names {
				if m == n {
					return true
				}
			}
			return false
		}
	}
	tests := []struct {
		name    string
		opts    []string
		update  bool
		running func(string) bool
		want    Plan
		falses  string // the booleans that are false in want (they default to true)
		code    errcode.Code
		msg     string
	}{
		{name: "plain create", want: Plan{Strategy: StrategyCreate}},
		{name: "plain update", update: true, want: Plan{Strategy: StrategyInPlace}},
		{name: "option 1 stop-and-replace", update: true, opts: []string{KeyParallelUpdate, KeyMaxStop + "=5m"},
			want: Plan{Strategy: StrategyStopAndReplace, MaxStop: 5 * time.Minute, HasMaxStop: true}},
		{name: "option 1 parallel", update: true, opts: []string{KeyParallelUpdate + "," + KeyMinParallel + "=10m," + KeyMaxStop + "=1m"},
			want: Plan{Strategy: StrategyParallel, MinParallel: 10 * time.Minute, MaxStop: time.Minute, HasMaxStop: true}},
		{name: "option 1 parallel zero", update: true, opts: []string{KeyParallelUpdate, KeyMinParallel + "=0s"},
			want: Plan{Strategy: StrategyParallel}},
		{name: "option 2 by name", opts: []string{KeyReplaceJobName + "=old", KeyMaxStop + "=5m", KeyCancelOnDrainTimeout + "=false", KeyPreallocate + "=false", KeyRewind + "=false"},
			want: Plan{Strategy: StrategyStopAndReplace, ReplaceJobName: "old", MaxStop: 5 * time.Minute, HasMaxStop: true}, falses: "cancel,pre,rewind"},
		{name: "option 2 by id", opts: []string{KeyReplaceJobID + "=2026-11-30_01_51_02-3f9a0c1d", KeyMinParallel + "=1h"},
			want: Plan{Strategy: StrategyParallel, ReplaceJobID: "2026-11-30_01_51_02-3f9a0c1d", MinParallel: time.Hour}},
		{name: "create or update", opts: []string{KeyCreateOrUpdate}, want: Plan{Strategy: StrategyInPlace, CreateOrUpdate: true}},
		{name: "create or update replacing", opts: []string{KeyCreateOrUpdate, KeyParallelUpdate, KeyMaxStop + "=1m"},
			want: Plan{Strategy: StrategyStopAndReplace, CreateOrUpdate: true, MaxStop: time.Minute, HasMaxStop: true}},
		{name: "in place ignores parallel options", update: true, opts: []string{KeyInPlaceUpdate, KeyMaxStop + "=5m"},
			want: Plan{Strategy: StrategyInPlace, Notes: []string{"update_strategy_in_place_update: the in-place update ignores parallel_replace_job_max_stop_duration"}}},
		{name: "two strategies", update: true, opts: []string{KeyInPlaceUpdate, KeyParallelUpdate}, code: errcode.ConflictingServiceOptions, msg: "two update strategies"},
		{name: "name and id", opts: []string{KeyReplaceJobName + "=old", KeyReplaceJobID + "=2026-11-30_01_51_02-3f9a0c1d", KeyMaxStop + "=1m"}, code: errcode.ConflictingServiceOptions, msg: "give one"},
		{name: "new name with update, not running", update: true, running: running("old"), opts: []string{KeyReplaceJobName + "=old", KeyMaxStop + "=1m"}, code: errcode.NoRunningJob, msg: "no running job named new: parallel_replace_job_name=old replaces a job under the new name new, so " + AsNewJob},
		{name: "new name with update, unknown", update: true, opts: []string{KeyReplaceJobName + "=old", KeyMaxStop + "=1m"}, code: errcode.ConflictingServiceOptions, msg: "weir run without --update, or POST /v1/jobs)"},
		{name: "new name with update, running", update: true, running: running("new"), opts: []string{KeyReplaceJobName + "=old", KeyMaxStop + "=1m"}, code: errcode.ConflictingServiceOptions, msg: "weir run without --update, or POST /v1/jobs)"},
		{name: "replace itself", opts: []string{KeyReplaceJobName + "=new", KeyMaxStop + "=1m"}, code: errcode.ConflictingServiceOptions, msg: "names the job itself: to replace a job under the same name, " + AsUpdate},
		{name: "parallel without update", opts: []string{KeyParallelUpdate, KeyMaxStop + "=1m"}, code: errcode.ConflictingServiceOptions, msg: AsUpdate},
		{name: "in place without update", opts: []string{KeyInPlaceUpdate}, code: errcode.ConflictingServiceOptions, msg: AsUpdate},
		{name: "replacement without duration", update: true, opts: []string{KeyParallelUpdate}, code: errcode.ConflictingServiceOptions, msg: "needs parallel_replace_job_min_parallel_pipelines_duration=D"},
		{name: "option 2 without duration", opts: []string{KeyReplaceJobName + "=old"}, code: errcode.ConflictingServiceOptions, msg: "parallel_replace_job_max_stop_duration=D"},
		{name: "duration without strategy on update", update: true, opts: []string{KeyMaxStop + "=1m"}, code: errcode.ConflictingServiceOptions, msg: "add update_strategy_parallel_job_update"},
		{name: "duration on create", opts: []string{KeyCancelOnDrainTimeout + "=false"}, code: errcode.ConflictingServiceOptions, msg: "applies to a replacement job: to replace the job of new, " + AsUpdate},
		{name: "parity gate defaults", update: true, opts: []string{KeyParallelUpdate, KeyMinParallel + "=0s", KeyCutoverGate + "=parity"},
			want: Plan{Strategy: StrategyParallel, Gate: GateParity}},
		{name: "parity gate figures", update: true, opts: []string{KeyParallelUpdate, KeyMinParallel + "=0s", KeyCutoverGate + "=parity", KeyParityBudget + "=2", KeyParityWindows + "=5", KeyParityDeadline + "=20s"},
			want: Plan{Strategy: StrategyParallel, Gate: GateParity, ParityBudget: 2, ParityWindows: 5, ParityDeadline: 20 * time.Second}},
		{name: "timer gate", update: true, opts: []string{KeyParallelUpdate, KeyMinParallel + "=1m", KeyCutoverGate + "=timer"},
			want: Plan{Strategy: StrategyParallel, MinParallel: time.Minute}},
		{name: "parity gate on stop-and-replace", update: true, opts: []string{KeyParallelUpdate, KeyMaxStop + "=1m", KeyCutoverGate + "=parity"}, code: errcode.ConflictingServiceOptions, msg: "add parallel_replace_job_min_parallel_pipelines_duration=D"},
		{name: "parity figures without the gate", update: true, opts: []string{KeyParallelUpdate, KeyMinParallel + "=1m", KeyParityWindows + "=2"}, code: errcode.ConflictingServiceOptions, msg: "applies to the parity gate: add weir_cutover_gate=parity"},
		{name: "parity gate on create", opts: []string{KeyCutoverGate + "=parity"}, code: errcode.ConflictingServiceOptions, msg: "applies to a replacement job"},
		{name: "rehearse a stop-and-replace", update: true, opts: []string{KeyParallelUpdate, KeyMaxStop + "=5m", KeyRehearse + "=required;since=2h", KeyParityBudget + "=1"},
			want: Plan{Strategy: StrategyStopAndReplace, MaxStop: 5 * time.Minute, HasMaxStop: true, Rehearse: true, RehearseSince: 2 * time.Hour, ParityBudget: 1}},
		{name: "rehearse an in-place update", update: true, opts: []string{KeyRehearse + "=required"},
			want: Plan{Strategy: StrategyInPlace, Rehearse: true, RehearseSince: DefaultRehearseSince}},
		{name: "rehearse an explicit in-place update with a budget", update: true, opts: []string{KeyInPlaceUpdate, KeyRehearse + "=required", KeyParityBudget + "=2"},
			want: Plan{Strategy: StrategyInPlace, Rehearse: true, RehearseSince: DefaultRehearseSince, ParityBudget: 2}},
		{name: "rehearse a parallel replacement", update: true, opts: []string{KeyParallelUpdate, KeyMinParallel + "=0s", KeyRehearse + "=required"}, code: errcode.ConflictingServiceOptions, msg: "use weir_cutover_gate=parity"},
		{name: "rehearse a new job", opts: []string{KeyRehearse + "=required"}, code: errcode.ConflictingServiceOptions, msg: "rehearses an update"},
		{name: "create or update with new name", opts: []string{KeyCreateOrUpdate, KeyReplaceJobName + "=old", KeyMaxStop + "=1m"}, code: errcode.ConflictingServiceOptions, msg: "give one of them"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseAndResolve(tc.opts, "new", tc.update, tc.running)
			if tc.code != "" {
				var e *Error
				if !errors.As(err, &e) || e.Code != tc.code || !strings.Contains(e.Message, tc.msg) {
					t.Fatalf("Resolve(%q, update=%v) = %+v, %v; want %s containing %q", tc.opts, tc.update, got, err, tc.code, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%q, update=%v): %v", tc.opts, tc.update, err)
			}
			want := tc.want
			want.CancelOnDrainTimeout = !strings.Contains(tc.falses, "cancel")
			want.Preallocate = !strings.Contains(tc.falses, "pre")
			want.Rewind = !strings.Contains(tc.falses, "rewind")
			if want.Gate == "" {
				want.Gate = GateTimer
			}
			if want.ParityWindows == 0 {
				want.ParityWindows = DefaultParityWindows
			}
			if want.ParityDeadline == 0 {
				want.ParityDeadline = DefaultParityDeadline
			}
			if g, w := planString(got), planString(want); g != w {
				t.Errorf("Resolve(%q, update=%v)\n got %s\nwant %s", tc.opts, tc.update, g, w)
			}
		})
	}
}

func planString(p Plan) string {
	return fmt.Sprintf("%+v", p)
}
