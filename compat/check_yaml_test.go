package compat_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/yamlpipe"
)

// baseYAML is the running job of the YAML cases: events are validated
// against a side input of known users, projected, and summed per user in
// five-minute windows.
const baseYAML = `pipeline:
  transforms:
    - type: ReadFromJson
      name: ReadEvents
      config:
        path: events.jsonl
        schema: {user: string, amount: int, ts: timestamp}
        timestamp_field: ts
    - type: Create
      name: KnownUsers
      config:
        elements: [{user: ann}, {user: bob}]
    - type: Validate
      name: CheckUser
      input: ReadEvents
      config:
        side_inputs: {known: KnownUsers}
        side_input_key: user
        rules:
          known_user: user in known
      error_handling:
        output: invalid
    - type: MapToFields
      name: Enrich
      input: CheckUser
      config:
        fields:
          user: user
          amount: amount
    - type: Combine
      name: CountByUser
      input: Enrich
      windowing:
        type: fixed
        size: 5m
      config:
        group_by: user
        combine:
          total: {value: amount, fn: sum}
    - type: WriteToJson
      name: WriteTotals
      input: CountByUser
      config:
        path: out/totals.jsonl
    - type: WriteToJson
      name: WriteRejects
      input: CheckUser.invalid
      config:
        path: out/rejects.jsonl
`

// edit is one textual change of baseYAML.
type edit struct{ old, new string }

// applyEdits applies edits in order; each must match.
func applyEdits(t *testing.T, src string, edits []edit) string {
	t.Helper()
	for _, e := range edits {
		if !strings.Contains(src, e.old) {
			t.Fatalf("edit: %q is not in the pipeline:\n%s", e.old, src)
		}
		src = strings.Replace(src, e.old, e.new, 1)
	}
	return src
}

// loadYAML writes src into dir as name and loads it as weir check does.
func loadYAML(t *testing.T, dir, name, src string) *graph.Pipeline {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := yamlpipe.LoadFile(path, yamlpipe.Options{BaseDir: dir})
	if err != nil {
		t.Fatalf("loading %s: %v\n%s", name, err, src)
	}
	return p.Graph()
}

// want is what a check must report. Codes are compared as sets of
// "STEP CODE"; strings must occur in the JSON-free text rendering.
type want struct {
	compatible bool
	errors     []string // "Step CODE"
	warnings   []string
	dropped    []string // steps
	matches    []string // "Old->New"
	text       []string // substrings of the text report
	notText    []string // not substrings of the text report
}

func (w want) check(t *testing.T, r compat.Report) {
	t.Helper()
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if r.Compatible != w.compatible {
		t.Errorf("compatible = %v, want %v\n%s", r.Compatible, w.compatible, text.String())
	}
	eq := func(what string, got, want []string) {
		t.Helper()
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n got %q\nwant %q\n%s", what, got, want, text.String())
		}
	}
	findings := func(fs []compat.Finding) []string {
		out := []string{}
		for _, f := range fs {
			out = append(out, f.Step+" "+string(f.Code))
		}
		return out
	}
	eq("errors", findings(r.Errors), nonNil(w.errors))
	eq("warnings", findings(r.Warnings), nonNil(w.warnings))
	dropped := []string{}
	for _, d := range r.DroppedState {
		dropped = append(dropped, d.Step)
	}
	eq("dropped state", dropped, nonNil(w.dropped))
	if w.matches != nil {
		matches := []string{}
		for _, m := range r.Matches {
			matches = append(matches, m.Old+"->"+m.New)
		}
		eq("matches", matches, w.matches)
	}
	for _, s := range w.text {
		if !strings.Contains(text.String(), s) {
			t.Errorf("the report lacks %q:\n%s", s, text.String())
		}
	}
	for _, s := range w.notText {
		if strings.Contains(text.String(), s) {
			t.Errorf("the report has %q:\n%s", s, text.String())
		}
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// TestCheckYAML runs the rules of the check over real YAML pipelines: the
// running job is baseYAML with oldEdits, the new version baseYAML with
// newEdits.
func TestCheckYAML(t *testing.T) {
	allMatches := []string{"CountByUser->CountByUser", "KnownUsers->KnownUsers", "ReadEvents->ReadEvents"}
	tests := []struct {
		name     string
		oldEdits []edit
		newEdits []edit
		mapping  string
		allow    bool
		want     want
	}{
		{name: "unchanged", want: want{compatible: true, matches: allMatches, text: []string{"compatible: ", "state carried over:", "CountByUser (combine_per_key)"}}},

		// Renames.
		{name: "rename without a mapping",
			newEdits: []edit{{"name: CountByUser", "name: CountByUserId"}, {"input: CountByUser", "input: CountByUserId"}},
			want: want{errors: []string{"CountByUser STEP_MISSING"}, text: []string{
				"step CountByUser has no match",
				`CountByUserId has the same kind, coders and windowing — add --transform-name-mapping '{"CountByUser":"CountByUserId"}'`}}},
		{name: "rename and window size change without a mapping",
			newEdits: []edit{{"name: CountByUser", "name: CountByUserId"}, {"input: CountByUser", "input: CountByUserId"}, {"size: 5m", "size: 10m"}},
			want: want{errors: []string{"CountByUser STEP_MISSING"}, text: []string{
				`CountByUserId has the same kind and coders, and windowing that differs only in its numbers — add --transform-name-mapping '{"CountByUser":"CountByUserId"}'`}}},
		{name: "rename without a mapping, no candidate",
			newEdits: []edit{{"name: CountByUser", "name: CountByUserId"}, {"input: CountByUser", "input: CountByUserId"}, {"fn: sum", "fn: max"}},
			want: want{errors: []string{"CountByUser STEP_MISSING"}, text: []string{
				`fix: restore step CountByUser, map it to its new name with --transform-name-mapping '{"CountByUser":"NEW_NAME"}', or map it to "" to drop its state on purpose: --transform-name-mapping '{"CountByUser":""}'`}}},
		{name: "rename with a mapping",
			newEdits: []edit{{"name: CountByUser", "name: CountByUserId"}, {"input: CountByUser", "input: CountByUserId"}},
			mapping:  `{"CountByUser":"CountByUserId"}`,
			want:     want{compatible: true, matches: []string{"CountByUser->CountByUserId", "KnownUsers->KnownUsers", "ReadEvents->ReadEvents"}, text: []string{"CountByUser -> CountByUserId (combine_per_key)"}}},

		// What a combine stores.
		{name: "key field added",
			newEdits: []edit{{"group_by: user", "group_by: [user, amount]"}},
			want: want{errors: []string{"CountByUser KEY_CODER_CHANGED"}, text: []string{"weir:coder:row{user:string}", "weir:coder:row{user:string,amount:int}", `'{"CountByUser":""}'`,
				"state that would be carried over once the errors are fixed:"},
				// The step with the error carries nothing over.
				notText: []string{"  CountByUser (combine_per_key)", "\nstate carried over:"}}},
		{name: "key field removed with a declared re-key",
			oldEdits: []edit{{"group_by: user", "group_by: [user, amount]"}},
			newEdits: []edit{{"    - type: WriteToJson\n      name: WriteTotals", "      migrations: {rekey: {from: [user, amount]}}\n    - type: WriteToJson\n      name: WriteTotals"}},
			want:     want{compatible: true, warnings: []string{"CountByUser STATE_REKEYED"}, text: []string{"row{user:string,amount:int}", "merge window by window"}}},
		{name: "key field removed, the fix names the re-key",
			oldEdits: []edit{{"group_by: user", "group_by: [user, amount]"}},
			want:     want{errors: []string{"CountByUser KEY_CODER_CHANGED"}, text: []string{"migrations: {rekey: {from: [user, amount]}}"}}},
		{name: "re-key declared from other fields",
			oldEdits: []edit{{"group_by: user", "group_by: [user, amount]"}},
			newEdits: []edit{{"    - type: WriteToJson\n      name: WriteTotals", "      migrations: {rekey: {from: [amount, user]}}\n    - type: WriteToJson\n      name: WriteTotals"}},
			want:     want{errors: []string{"CountByUser REKEY_FROM_MISMATCH"}, text: []string{"declare rekey: {from: [user, amount]}"}}},
		{name: "key field typed differently",
			newEdits: []edit{{"user: user\n", "user: size(user)\n"}},
			want:     want{errors: []string{"CountByUser KEY_CODER_CHANGED"}, text: []string{"{user:int}"}}},
		{name: "accumulator sum to mean",
			newEdits: []edit{{"fn: sum", "fn: mean"}},
			want:     want{errors: []string{"CountByUser STATE_CODER_CHANGED"}, text: []string{"accumulator changed", "sum:int", "mean:int"}}},
		{name: "accumulator value field type changed to a string",
			newEdits: []edit{{"amount: amount\n", "amount: string(amount)\n"}, {"fn: sum", "fn: max"}},
			want:     want{errors: []string{"CountByUser STATE_CODER_CHANGED"}, text: []string{"max:string"}}},
		{name: "output appended keeps the accumulators",
			newEdits: []edit{{"total: {value: amount, fn: sum}", "total: {value: amount, fn: sum}\n          biggest: {value: amount, fn: max}"}},
			want: want{compatible: true, warnings: []string{"CountByUser COMBINE_OUTPUTS_CHANGED"}, text: []string{"gained 1 output(s) after its existing ones (max of int)",
				"cover only the elements that arrive after it"}}},
		{name: "output appended with an init starts from it",
			newEdits: []edit{{"total: {value: amount, fn: sum}", "total: {value: amount, fn: sum}\n          biggest: {value: amount, fn: max}"},
				{"    - type: WriteToJson", "      migrations: {accumulators: {biggest: {init: \"total\"}}}\n    - type: WriteToJson"}},
			want: want{compatible: true, warnings: []string{"CountByUser COMBINE_OUTPUTS_CHANGED"}, text: []string{"gained 1 output(s) after its existing ones (max of int)",
				"they start from their declared init (biggest)"}}},
		{name: "outputs appended, one with an init",
			newEdits: []edit{{"total: {value: amount, fn: sum}", "total: {value: amount, fn: sum}\n          biggest: {value: amount, fn: max}\n          smallest: {value: amount, fn: min}"},
				{"    - type: WriteToJson", "      migrations: {accumulators: {smallest: {init: \"total\"}}}\n    - type: WriteToJson"}},
			want: want{compatible: true, warnings: []string{"CountByUser COMBINE_OUTPUTS_CHANGED"}, text: []string{"smallest start from their declared init, and biggest start empty"}}},
		{name: "last output removed keeps the others",
			oldEdits: []edit{{"total: {value: amount, fn: sum}", "total: {value: amount, fn: sum}\n          biggest: {value: amount, fn: max}"}},
			want:     want{compatible: true, warnings: []string{"CountByUser COMBINE_OUTPUTS_CHANGED"}, text: []string{"lost its last 1 output(s) (max of int)"}}},
		{name: "output inserted before the others, NEW loaded without the slots",
			newEdits: []edit{{"total: {value: amount, fn: sum}", "biggest: {value: amount, fn: max}\n          total: {value: amount, fn: sum}"}},
			want:     want{errors: []string{"CountByUser COMBINE_OUTPUTS_REORDERED"}, text: []string{"total from position 1 to 2"}}},
		{name: "outputs of one type swapped, NEW loaded without the slots",
			oldEdits: []edit{{"total: {value: amount, fn: sum}", "total: {value: amount, fn: sum}\n          also: {value: amount, fn: sum}"}},
			newEdits: []edit{{"total: {value: amount, fn: sum}", "also: {value: amount, fn: sum}\n          total: {value: amount, fn: sum}"}},
			want:     want{errors: []string{"CountByUser COMBINE_OUTPUTS_REORDERED"}, text: []string{"also from position 2 to 1; total from position 1 to 2"}}},
		{name: "output of one type removed in the middle, NEW loaded without the slots",
			oldEdits: []edit{{"total: {value: amount, fn: sum}", "total: {value: amount, fn: sum}\n          also: {value: amount, fn: sum}"}},
			newEdits: []edit{{"total: {value: amount, fn: sum}", "also: {value: amount, fn: sum}"}},
			want:     want{errors: []string{"CountByUser COMBINE_OUTPUTS_REORDERED"}, text: []string{"whose accumulator slots weir then keeps where they are"}}},
		{name: "value field widened from int to float",
			oldEdits: []edit{{"total: {value: amount, fn: sum}", "total: {value: amount, fn: sum}\n          biggest: {value: amount, fn: max}"}},
			newEdits: []edit{{"amount: amount\n", "amount: double(amount)\n"}, {"total: {value: amount, fn: sum}", "total: {value: amount, fn: sum}\n          biggest: {value: amount, fn: max}"}},
			want:     want{compatible: true, warnings: []string{"CountByUser COMBINE_OUTPUT_WIDENED"}, text: []string{"position 1 and 2 widened from int to float"}}},
		{name: "value field narrowed from float to int is refused",
			oldEdits: []edit{{"amount: amount\n", "amount: double(amount)\n"}},
			want:     want{errors: []string{"CountByUser STATE_CODER_CHANGED"}}},
		{name: "output renamed undeclared keeps the accumulator",
			newEdits: []edit{{"total: {value", "sum_amount: {value"}},
			want:     want{compatible: true, warnings: []string{"CountByUser COMBINE_OUTPUT_RENAMED"}, text: []string{"sum_amount: {renamed_from: total}"}}},
		{name: "output renamed declared",
			newEdits: []edit{{"total: {value", "sum_amount: {value"}, {"    - type: WriteToJson", "      migrations: {accumulators: {sum_amount: {renamed_from: total}}}\n    - type: WriteToJson"}},
			want:     want{compatible: true}},
		{name: "output renamed from a name the job lacks",
			newEdits: []edit{{"total: {value", "sum_amount: {value"}, {"    - type: WriteToJson", "      migrations: {accumulators: {sum_amount: {renamed_from: totl}}}\n    - type: WriteToJson"}},
			want:     want{errors: []string{"CountByUser COMBINE_RENAME_UNKNOWN"}, text: []string{`renamed_from "totl"`}}},

		// Windowing of the combine's input.
		{name: "window type fixed to sliding",
			newEdits: []edit{{"size: 5m", "size: 5m\n        period: 1m"}, {"type: fixed", "type: sliding"}},
			want:     want{errors: []string{"CountByUser WINDOW_FN_CHANGED"}, text: []string{"from fixed windows of 5m0s to sliding windows of 5m0s every 1m0s"}}},
		{name: "window type fixed to global",
			newEdits: []edit{{"type: fixed\n        size: 5m", "type: global"}},
			want:     want{errors: []string{"CountByUser WINDOW_FN_CHANGED"}}},
		{name: "trigger changed",
			newEdits: []edit{{"size: 5m", "size: 5m\n        trigger:\n          type: after_watermark\n          late: {type: after_count, count: 1}"}},
			want:     want{errors: []string{"CountByUser TRIGGER_CHANGED"}, text: []string{"from default to after_watermark(late=after_count(1))"}}},
		{name: "accumulation mode changed",
			newEdits: []edit{{"size: 5m", "size: 5m\n        accumulation_mode: accumulating"}},
			want:     want{errors: []string{"CountByUser ACCUMULATION_CHANGED"}, text: []string{"from discarding to accumulating"}}},
		{name: "window size changed",
			newEdits: []edit{{"size: 5m", "size: 10m"}},
			want:     want{compatible: true, warnings: []string{"CountByUser WINDOW_PARAMS_CHANGED"}, text: []string{"window size from 5m0s to 10m0s", "windows already buffered keep their old boundaries"}}},
		{name: "allowed lateness and trigger count changed",
			oldEdits: []edit{{"size: 5m", "size: 5m\n        trigger:\n          type: after_watermark\n          late: {type: after_count, count: 1}"}},
			newEdits: []edit{{"size: 5m", "size: 5m\n        allowed_lateness: 1m\n        trigger:\n          type: after_watermark\n          late: {type: after_count, count: 3}"}},
			want:     want{compatible: true, warnings: []string{"CountByUser WINDOW_PARAMS_CHANGED"}, text: []string{"allowed lateness from 0s to 1m0s", "trigger.late count from 1 to 3"}}},

		// Side inputs.
		{name: "side input added",
			newEdits: []edit{{"        fields:\n          user: user", "        side_inputs: {known: KnownUsers}\n        side_input_key: user\n        fields:\n          user: user"}},
			want:     want{errors: []string{"Enrich SIDE_INPUTS_CHANGED"}, text: []string{"side inputs changed (added known)", "keep the side inputs of Enrich as they were (none)"}}},
		{name: "side input removed",
			newEdits: []edit{{"        side_inputs: {known: KnownUsers}\n        side_input_key: user\n", ""}, {"user in known", `user != ""`}},
			want:     want{errors: []string{"CheckUser SIDE_INPUTS_CHANGED"}, text: []string{"side inputs changed (removed known)"}}},

		// Changes that pass.
		{name: "stateless step added",
			newEdits: []edit{{"      input: Enrich\n", "      input: Positive\n"}, {"    - type: Combine\n", "    - type: Filter\n      name: Positive\n      input: Enrich\n      config:\n        keep: amount > 0\n    - type: Combine\n"}},
			want:     want{compatible: true, matches: allMatches}},
		{name: "stateless step removed",
			oldEdits: []edit{{"      input: Enrich\n", "      input: Positive\n"}, {"    - type: Combine\n", "    - type: Filter\n      name: Positive\n      input: Enrich\n      config:\n        keep: amount > 0\n    - type: Combine\n"}},
			want:     want{compatible: true, matches: allMatches}},
		{name: "CEL expression changed",
			newEdits: []edit{{"user in known", "user in known && amount > 0"}},
			want:     want{compatible: true}},
		{name: "sink branch added",
			newEdits: []edit{{"    - type: WriteToJson\n      name: WriteRejects", "    - type: WriteToJson\n      name: WriteEnriched\n      input: Enrich\n      config:\n        path: out/enriched.jsonl\n    - type: WriteToJson\n      name: WriteRejects"}},
			want:     want{compatible: true}},
		{name: "unrelated upstream field added",
			newEdits: []edit{{"          amount: amount\n", "          amount: amount\n          big: amount > 100\n"}},
			want:     want{compatible: true, matches: allMatches}},
		{name: "side input contents changed",
			newEdits: []edit{{"{user: bob}", "{user: bob}, {user: cid}"}},
			want:     want{compatible: true}},

		// Mappings.
		{name: "mapping names an unknown step",
			mapping: `{"CountByUsr":"CountByUser"}`,
			want:    want{errors: []string{"CountByUsr MAPPING_UNKNOWN_STEP"}, text: []string{"the running pipeline has no step CountByUsr"}}},
		{name: "a suggested mapping fix leaves out the misspelt entry",
			newEdits: []edit{{"name: CountByUser", "name: CountByUserId"}, {"input: CountByUser", "input: CountByUserId"}},
			mapping:  `{"CountByUsr":"CountByUserId"}`,
			want: want{errors: []string{"CountByUser STEP_MISSING", "CountByUsr MAPPING_UNKNOWN_STEP"},
				text:    []string{`add --transform-name-mapping '{"CountByUser":"CountByUserId"}'`},
				notText: []string{`"CountByUsr":"CountByUserId"`}}},
		{name: "mapping to a step the new pipeline lacks",
			mapping: `{"Enrich":"Enrichment"}`,
			want:    want{errors: []string{"Enrich MAPPING_UNKNOWN_STEP"}, text: []string{"the new pipeline has no step Enrichment"}}},
		{name: "mapping to the empty string drops state",
			newEdits: []edit{{"input: CountByUser", "input: Enrich"}},
			mapping:  `{"CountByUser":""}`,
			want: want{compatible: true, warnings: []string{"CountByUser STATE_DROPPED"}, dropped: []string{"CountByUser"},
				text: []string{"state dropped on purpose:", "CountByUser (combine_per_key): keys weir:coder:row{user:string}, accumulators weir:yaml:combine_accumulator{sum:int}"}}},
		{name: "mapping to the empty string restarts a changed step",
			newEdits: []edit{{"group_by: user", "group_by: [user, amount]"}},
			mapping:  `{"CountByUser":""}`,
			want:     want{compatible: true, warnings: []string{"CountByUser STATE_DROPPED"}, dropped: []string{"CountByUser"}}},

		// Sources.
		{name: "source file changed",
			newEdits: []edit{{"path: events.jsonl", "path: events-v2.jsonl"}},
			want:     want{errors: []string{"ReadEvents SOURCE_CHANGED"}, text: []string{"events-v2.jsonl", "--allow-source-change"}}},
		{name: "source file changed, allowed",
			newEdits: []edit{{"path: events.jsonl", "path: events-v2.jsonl"}},
			allow:    true,
			want:     want{compatible: true, warnings: []string{"ReadEvents SOURCE_POSITIONS_DROPPED"}, dropped: []string{"ReadEvents"}, text: []string{"read positions", "are dropped"}}},
		{name: "source renamed without a mapping",
			newEdits: []edit{{"name: ReadEvents", "name: Events"}, {"input: ReadEvents", "input: Events"}},
			want:     want{errors: []string{"ReadEvents SOURCE_CHANGED"}, text: []string{`Events reads the same file_json — add --transform-name-mapping '{"ReadEvents":"Events"}'`}}},
		{name: "created source renamed with a mapping",
			newEdits: []edit{{"name: KnownUsers", "name: Users"}, {"known: KnownUsers", "known: Users"}},
			mapping:  `{"KnownUsers":"Users"}`,
			want:     want{compatible: true, matches: []string{"CountByUser->CountByUser", "KnownUsers->Users", "ReadEvents->ReadEvents"}}},

		// Every reason at once.
		{name: "every reason is listed",
			newEdits: []edit{{"path: events.jsonl", "path: other.jsonl"}, {"fn: sum", "fn: max"}, {"group_by: user", "group_by: [user, amount]"}, {"size: 5m", "size: 5m\n        accumulation_mode: accumulating"}},
			want:     want{errors: []string{"CountByUser ACCUMULATION_CHANGED", "CountByUser KEY_CODER_CHANGED", "CountByUser STATE_CODER_CHANGED", "ReadEvents SOURCE_CHANGED"}, text: []string{"incompatible: 4 errors, 0 warnings"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			old := loadYAML(t, dir, "old.yaml", applyEdits(t, baseYAML, tc.oldEdits))
			newp := loadYAML(t, dir, "new.yaml", applyEdits(t, baseYAML, tc.newEdits))
			m, err := compat.ParseMapping(tc.mapping)
			if err != nil {
				t.Fatal(err)
			}
			tc.want.check(t, compat.Check(old, newp, compat.Options{Mapping: m, AllowSourceChange: tc.allow}))
		})
	}
}
