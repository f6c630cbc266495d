package diffcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/cmd/weir/internal/serverconn"
	"github.com/weir-dev/weir/diff"
	"github.com/weir-dev/weir/io/sqlsink"
)

// Flags are the flags of `weir diff`; Run takes them from another
// command too (a schedule's parity check).
type Flags struct {
	// Format is --format: text or json.
	Format string
	// Key and Value are --key and --value: comma-separated fields.
	Key   string
	Value string
	// Window is --window-field: the fields that carry the window.
	Window string
	// Budget is --budget: differences still counted as parity.
	Budget int64
	// MaxDetails is --max-details: differences listed one by one.
	MaxDetails int
	// RejectsOld and RejectsNew are --rejects-old and --rejects-new.
	RejectsOld string
	RejectsNew string
	// InputCount is --input-count; negative: conservation is not checked
	// (unless Input is set).
	InputCount float64
	// Input is --input: the input both runs read, whose rows (or conserved
	// field's sum) are the input of conservation.
	Input string
	// Conserve is --conserve IN=OUT.
	Conserve string
	// MemoryRows is --memory-rows: rows per side kept in memory.
	MemoryRows int
	// Partition, when set, keeps only the rows of this partition of an
	// output that holds several (its weir_partition column).
	Partition string
	// Server answers job:NAME specifiers.
	Server serverconn.Flag
}

// Command returns `weir diff`.
func Command(e *cli.Env) *cobra.Command {
	var f Flags
	cmd := &cobra.Command{
		Use:   "diff OLD NEW [--key F1,F2] [--value F] [--rejects-old FILE --rejects-new FILE] [--input-count N]",
		Short: "Compare two outputs of bounded runs at the full key: rows, values, per-key totals, rejects by reason, conservation",
		Long: `Diff compares two outputs of bounded runs — two jobs' partition runs, a
staged output against the published one, an output against an export of the
old system's results — at the full key (the key fields and the window), with
the comparison of weir rehearse and its report formats and exit codes.

OLD and NEW are output specifiers:
  FILE.jsonl, FILE.json     JSON lines (one object a line)
  FILE.csv                  CSV with a header row (columns typed as ReadFromCsv types them)
  FILE.parquet, FILE.avro   Parquet, Avro object container files
  'GLOB', DIRECTORY         every matching file, or a directory's part files, as one output
  sqlite:PATH#TABLE         a table or view of a SQLite database (read-only)
  postgres://...#TABLE      a table or view of a PostgreSQL database (only SELECT)
  job:NAME[/STEP]           the table job NAME's WriteToSql step STEP writes (its only
                            one when STEP is left out), found through the server
A weir SQL sink's table is compared as consumers see it: an upsert table holds
the newest revision per key and window, a façade view the newest
generation's row; the bookkeeping columns (pane_*, generation, job_id,
updated_at, element_id) are not compared.

--key defaults to the key a weir SQL sink declared for its table, or for a
job:NAME file output written straight from a Combine, its group_by fields;
for other files it is required. Rows carrying window_start and window_end (or the fields of
--window-field) are keyed by their window too. --value lists the compared
fields (default: every other field).

The report gives rows only in one output (missing_in_new, extra_in_new),
values differing (value_changed), the grand totals and the per-key totals
(per key, over every window, the sum of each numeric field: equal grand
totals can hide rows attributed to the wrong key), the rejects by reason
(--rejects-old/--rejects-new: error outputs whose rows carry a reason,
weir's {"element", "error": {"reason"}} or a flat "reason" field; the same
element rejected for another reason is reject_reason_changed), and
conservation per side: input = accepted + rejected, where input is
--input-count, or what weir diff counts in --input (an input manifest's
files, manifest:NAME#PARTITION, each checked against its recorded digest
first; or files or a table): the sum of --conserve's IN over its rows, or
its rows; accepted is the sum of --value (or of --conserve's OUT) over the
output's rows and rejected the sum of the same field (--conserve's IN) over
the rejected elements; without --value or --conserve, rows are counted.

Large outputs are sorted on disk beyond --memory-rows rows per side, never
held whole in memory.

Exit codes: 0 the outputs agree (within --budget) and every side
conserves; 7 they differ or a side does not conserve; 2 usage (a bad
specifier, no key); 8 an output could not be read.`,
		Args: cli.ExactArgs("OLD", "NEW"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return Run(cmd.Context(), e, args[0], args[1], f)
		},
	}
	fl := cmd.Flags()
	cli.AddFormatFlag(cmd, &f.Format)
	serverconn.AddFlag(cmd, &f.Server)
	fl.StringVar(&f.Key, "key", "", "key fields, comma-separated (default: the key a weir SQL sink declared)")
	fl.StringVar(&f.Value, "value", "", "compared value fields, comma-separated (default: every field but the key, the window and bookkeeping)")
	fl.StringVar(&f.Window, "window-field", "window_start,window_end", "the fields that carry the window, comma-separated; rows without them are in the global window")
	fl.Int64Var(&f.Budget, "budget", 0, "differences still counted as parity")
	fl.IntVar(&f.MaxDetails, "max-details", 100, "differences and per-key totals listed one by one (every one is counted)")
	fl.StringVar(&f.RejectsOld, "rejects-old", "", "the old run's rejects (an error output or dead-letter export; any output specifier)")
	fl.StringVar(&f.RejectsNew, "rejects-new", "", "the new run's rejects")
	fl.Float64Var(&f.InputCount, "input-count", -1, "what both runs read (rows, or the sum of the conserved field): check input = accepted + rejected on each side")
	fl.StringVar(&f.Input, "input", "", "what both runs read, counted by weir diff: manifest:NAME#PARTITION (an input manifest's files, checked against their digests), or files, a glob or a table; its rows, or the sum of the conserved field, are the input of conservation")
	fl.StringVar(&f.Conserve, "conserve", "", "IN=OUT: conserve the rejected elements' field IN and the output's field OUT (default: --value's field on both)")
	fl.IntVar(&f.MemoryRows, "memory-rows", diff.DefaultMemoryRows, "rows per side kept in memory before sorted runs go to disk")
	fl.StringVar(&f.Partition, "partition", "", "compare only this partition: rows of an output with a weir_partition column (a partition run's published target) are kept when it is P; an output without the column (a staged output) is one partition")
	return cmd
}

// Report is the report of `weir diff` (--format json).
type Report struct {
	Old    string   `json:"old"`
	New    string   `json:"new"`
	Key    []string `json:"key"`
	Window []string `json:"window"`
	// Verdict is "identical" or "different".
	Verdict      string              `json:"verdict"`
	Conservation []diff.Conservation `json:"conservation"`
	// Input is what --input read; absent without it.
	Input *InputRead `json:"input,omitempty"`
	// Rejects counts the rejects by reason on each side.
	Rejects []RejectCount `json:"rejects"`
	// GrandTotals are the sums of each numeric field over each side's
	// rows; GrandTotalsEqual says they agree.
	GrandTotals      grandTotals `json:"grand_totals"`
	GrandTotalsEqual bool        `json:"grand_totals_equal"`
	// SortedRuns counts the sorted runs written to disk per side.
	SortedRuns [2]int       `json:"sorted_runs"`
	Report     *diff.Report `json:"report"`
}

type grandTotals struct {
	Old map[string]float64 `json:"old"`
	New map[string]float64 `json:"new"`
}

// RejectCount is one reason's rejects on each side.
type RejectCount struct {
	Reason string `json:"reason"`
	Old    int64  `json:"old"`
	New    int64  `json:"new"`
}

// splitList splits a comma-separated flag.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Run compares the outputs oldArg and newArg as `weir diff OLD NEW` with
// flags f does, printing the report to e.Stdout.
func Run(ctx context.Context, e *cli.Env, oldArg, newArg string, f Flags) error {
	if err := cli.CheckFormat(f.Format); err != nil {
		return err
	}
	if f.Budget < 0 || f.MaxDetails < 0 {
		return cli.UsageErrorf("--budget and --max-details must be >= 0")
	}
	if (f.RejectsOld == "") != (f.RejectsNew == "") {
		return cli.UsageErrorf("give both --rejects-old and --rejects-new, or neither")
	}
	if f.Input != "" && f.InputCount >= 0 {
		return cli.UsageErrorf("give --input or --input-count, not both")
	}
	specs := make([]outputSpec, 2)
	for i, a := range []string{oldArg, newArg} {
		sp, err := parseOutputSpec(a)
		if err != nil {
			return err
		}
		if sp.kind == specJob {
			if sp, err = resolveJobSpec(ctx, f.Server, sp); err != nil {
				return err
			}
		}
		specs[i] = sp
	}
	var rejects [2]*outputSpec
	if f.RejectsOld != "" {
		for i, a := range []string{f.RejectsOld, f.RejectsNew} {
			sp, err := parseOutputSpec(a)
			if err != nil {
				return err
			}
			rejects[i] = &sp
		}
	}
	values := splitList(f.Value)
	inField, outField := "", ""
	switch {
	case f.Conserve != "":
		var ok bool
		inField, outField, ok = strings.Cut(f.Conserve, "=")
		if !ok || inField == "" || outField == "" {
			return cli.UsageErrorf("--conserve %q: want IN=OUT, e.g. amount=total", f.Conserve)
		}
	case len(values) == 1:
		inField, outField = values[0], values[0]
	}
	inputCount := f.InputCount
	var input *InputRead
	if f.Input != "" {
		var err error
		if input, err = readInput(ctx, f.Server, f.Input, inField); err != nil {
			return err
		}
		inputCount = input.total()
	}
	key := splitList(f.Key)
	if len(key) == 0 {
		for _, sp := range specs {
			if len(sp.key) > 0 {
				key = sp.key
				break
			}
			k, err := sp.declaredKey(ctx)
			if err != nil {
				return cli.WithCode(cli.ExitRehearsalFailed, err)
			}
			if len(k) > 0 {
				key = k
				break
			}
		}
		if len(key) == 0 {
			return cli.UsageErrorf("give --key: neither %s nor %s is a weir SQL sink's table with a declared key or a job's file output written from a Combine", oldArg, newArg)
		}
	}
	// A published target's weir_partition says which run published a row:
	// bookkeeping, never a compared value.
	layout := diff.Layout{Output: "output", Key: key, Window: splitList(f.Window), Values: values,
		Ignore: append(sqlsink.BookkeepingColumns(), sqlsink.PartitionColumn)}
	sides := make([]*sideRows, 2)
	for i := range specs {
		s, err := readSide(ctx, specs[i], rejects[i], layout, inField, f.MemoryRows, f.Partition)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var ee *cli.ExitError
			if errors.As(err, &ee) {
				return err
			}
			return cli.WithCode(cli.ExitRehearsalFailed, fmt.Errorf("reading the %s output: %w", []string{"old", "new"}[i], err))
		}
		defer s.rows.Close()
		sides[i] = s
	}
	if f.Partition != "" && !sides[0].partitioned && !sides[1].partitioned {
		return cli.UsageErrorf("--partition %s: neither output has rows with a %s column (a partition run's published target has one)", f.Partition, sqlsink.PartitionColumn)
	}
	out := &Report{Old: Redact(oldArg), New: Redact(newArg), Key: key, Window: layout.Window, Verdict: "identical", Input: input}
	ds := make([]diff.Side, 2)
	for i, s := range sides {
		r, err := s.rows.Reader()
		if err != nil {
			return cli.WithCode(cli.ExitRehearsalFailed, err)
		}
		out.SortedRuns[i] = s.rows.Runs()
		// Every row read is one a consumer sees (an upsert table holds the
		// newest revision only); several rows of one key and window (an
		// append table, a key that is not unique) are all seen, and a
		// reader adds them up: append.
		ds[i] = diff.Side{Rows: diff.Ordinals(r), Outputs: map[string]diff.OutputInfo{"output": {Mode: diff.ModeAppend, Records: true}}}
	}
	details := f.MaxDetails
	if details == 0 {
		details = -1 // none listed (diff's 0 is its default)
	}
	rep, err := diff.Run(ds[0], diff.Side{}, ds[1], diff.Options{Budget: f.Budget, MaxDetails: details, KeyTotals: true})
	if err != nil {
		return cli.WithCode(cli.ExitRehearsalFailed, fmt.Errorf("comparing the outputs: %w", err))
	}
	out.Report = rep
	if o := rep.Output("output"); o != nil {
		out.GrandTotals = grandTotals{Old: o.Visible.SumsOld, New: o.Visible.SumsNew}
	}
	out.GrandTotalsEqual = sameSums(out.GrandTotals.Old, out.GrandTotals.New)
	out.Rejects = rejectCounts(sides[0], sides[1])
	if inputCount >= 0 {
		for i, run := range []string{"old", "new"} {
			s := sides[i]
			var c diff.Conservation
			if outField != "" {
				c = diff.Conserve(rep, i == 1, run, inField, outField, inputCount, s.rejectedSum)
			} else {
				c = diff.Conservation{Run: run, Field: "rows", Input: inputCount, Accepted: float64(s.records), Rejected: float64(s.rejectedN)}
				c.Balanced = c.Input == c.Accepted+c.Rejected
			}
			out.Conservation = append(out.Conservation, c)
		}
	}
	balanced := true
	for _, c := range out.Conservation {
		balanced = balanced && c.Balanced
	}
	if !rep.Identical() || !balanced {
		out.Verdict = "different"
	}
	if f.Format == cli.FormatJSON {
		enc := json.NewEncoder(e.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return cli.WithCode(cli.ExitFailure, fmt.Errorf("writing the report: %w", err))
		}
	} else if err := writeDiffReport(e.Stdout, out); err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("writing the report: %w", err))
	}
	switch {
	case !rep.Identical():
		return cli.WithCode(cli.ExitRehearsalDiffers, fmt.Errorf("%s differs from %s: %d difference(s), budget %d", newArg, oldArg, rep.Total, rep.Budget))
	case !balanced:
		return cli.WithCode(cli.ExitRehearsalDiffers, fmt.Errorf("conservation does not hold: input is not accepted + rejected"))
	}
	return nil
}

func sameSums(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || fmt.Sprint(v) != fmt.Sprint(w) {
			return false
		}
	}
	return true
}

func rejectCounts(old, new *sideRows) []RejectCount {
	reasons := map[string]bool{}
	for r := range old.rejects {
		reasons[r] = true
	}
	for r := range new.rejects {
		reasons[r] = true
	}
	out := []RejectCount{}
	for r := range reasons {
		out = append(out, RejectCount{Reason: r, Old: old.rejects[r], New: new.rejects[r]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Reason < out[j].Reason })
	return out
}

// totalsText prints sums as "total 425, count 3"; "missing" for nil.
func totalsText(m map[string]float64) string {
	if m == nil {
		return "missing"
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = k + " " + cli.Number(m[k])
	}
	if len(parts) == 0 {
		return "(no numeric field)"
	}
	return strings.Join(parts, ", ")
}

// writeDiffReport prints the summary, then the drill-down.
func writeDiffReport(w io.Writer, r *Report) error {
	rep := r.Report
	var b strings.Builder
	fmt.Fprintf(&b, "diff of %s against %s at key %s, window %s\n", r.New, r.Old, strings.Join(r.Key, ","), strings.Join(r.Window, ","))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nOUTPUT\tROWS OLD\tROWS NEW\tIDENTICAL\tVALUE\tMISSING\tEXTRA\tREASON\tKEY TOTALS DIFFERING")
	for _, o := range rep.Outputs {
		c := o.Classes
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f%%\t%d\t%d\t%d\t%d\t%d/%d\n", o.Output, o.RowsOld, o.RowsNew, o.IdenticalPercent,
			c[diff.ValueChanged], c[diff.MissingInNew], c[diff.ExtraInNew], c[diff.RejectReasonChanged], o.KeyTotals.Differing, o.KeyTotals.Keys)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	eq := "equal"
	if !r.GrandTotalsEqual {
		eq = "NOT equal"
	}
	fmt.Fprintf(&b, "\ngrand totals: old %s; new %s: %s\n", totalsText(nonNilSums(r.GrandTotals.Old)), totalsText(nonNilSums(r.GrandTotals.New)), eq)
	switch {
	case rep.KeyTotalsDiffering == 0:
		b.WriteString("per-key totals: every key agrees\n")
	default:
		fmt.Fprintf(&b, "per-key totals: %d key(s) differ", rep.KeyTotalsDiffering)
		if r.GrandTotalsEqual {
			b.WriteString(" although the grand totals agree (rows attributed to another key)")
		}
		b.WriteString("\n")
		for _, k := range rep.KeyTotals {
			fmt.Fprintf(&b, "  key %s: %s -> %s\n", k.Key, totalsText(k.Old), totalsText(k.New))
		}
		if rep.KeyTotalsOmitted > 0 {
			fmt.Fprintf(&b, "  %d more not listed (--max-details)\n", rep.KeyTotalsOmitted)
		}
	}
	if len(r.Rejects) > 0 {
		b.WriteString("rejects by reason:\n")
		for _, c := range r.Rejects {
			mark := ""
			if c.Old != c.New {
				mark = "  (differs)"
			}
			fmt.Fprintf(&b, "  %s: old %d, new %d%s\n", c.Reason, c.Old, c.New, mark)
		}
	}
	if in := r.Input; in != nil {
		fmt.Fprintf(&b, "input %s: %d row(s) in %d file(s)", in.Spec, in.Rows, in.Files)
		if in.Field != "" {
			fmt.Fprintf(&b, ", %s %s", in.Field, cli.Number(in.Sum))
		}
		b.WriteString("\n")
	}
	for _, c := range r.Conservation {
		verdict := "balanced"
		if !c.Balanced {
			verdict = "NOT balanced"
		}
		fmt.Fprintf(&b, "conservation (%s) %s: input %s = accepted %s + rejected %s: %s\n", c.Field, c.Run, cli.Number(c.Input), cli.Number(c.Accepted), cli.Number(c.Rejected), verdict)
	}
	fmt.Fprintf(&b, "verdict: %s (%d difference(s), budget %d)\n", strings.ToUpper(r.Verdict), rep.Total, rep.Budget)
	if len(rep.Differences) > 0 {
		fmt.Fprintf(&b, "\ndifferences (%d listed):\n", len(rep.Differences))
		for _, d := range rep.Differences {
			fmt.Fprintf(&b, "  %s  %s  key %s  window %s\n    old: %s\n    new: %s\n", d.Class, d.Output, d.Key, d.Window, rowText(d.Old), rowText(d.New))
		}
	}
	if rep.Omitted > 0 {
		fmt.Fprintf(&b, "\n%d more not listed (--max-details)\n", rep.Omitted)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func nonNilSums(m map[string]float64) map[string]float64 {
	if m == nil {
		return map[string]float64{}
	}
	return m
}

// rowText prints one side of a difference: rows read from files and
// tables carry no pane.
func rowText(p *diff.Pane) string {
	switch {
	case p == nil:
		return "(none)"
	case p.Reject != "":
		return "rejected " + p.Reject
	case p.Index > 0:
		return fmt.Sprintf("%s (row %d of the key and window)", p.Value, p.Index+1)
	}
	return p.Value
}
