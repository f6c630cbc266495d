package compat

import (
	"fmt"
	"io"
	"strings"
)

// WriteText writes r for people: a verdict line, then every error and
// warning with its code, the step, the reason and the fix, then the state
// dropped on purpose and the state carried over.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	if r.Compatible {
		fmt.Fprintf(&b, "compatible: the new pipeline can take over the running job's state (%s)\n", plural(len(r.Warnings), "warning"))
	} else {
		fmt.Fprintf(&b, "incompatible: %s, %s; the update would be refused and the running job left untouched\n",
			plural(len(r.Errors), "error"), plural(len(r.Warnings), "warning"))
	}
	section := func(label string, fs []Finding) {
		for _, f := range fs {
			fmt.Fprintf(&b, "\n%s %s: %s\n  %s\n", label, f.Code, f.Step, f.Reason)
			if f.Fix != "" {
				fmt.Fprintf(&b, "  fix: %s\n", f.Fix)
			}
		}
	}
	section("error", r.Errors)
	section("warning", r.Warnings)
	if len(r.DroppedState) > 0 {
		b.WriteString("\nstate dropped on purpose:\n")
		for _, d := range r.DroppedState {
			fmt.Fprintf(&b, "  %s (%s): %s\n", d.Step, d.Kind, d.What)
		}
	}
	// A step with an error carries nothing over: it is listed under its
	// error only.
	failed := map[string]bool{}
	for _, f := range r.Errors {
		failed[f.Step] = true
	}
	var carried []Match
	for _, m := range r.Matches {
		if !failed[m.Old] && !failed[m.New] {
			carried = append(carried, m)
		}
	}
	if len(carried) > 0 {
		if r.Compatible {
			b.WriteString("\nstate carried over:\n")
		} else {
			b.WriteString("\nstate that would be carried over once the errors are fixed:\n")
		}
		for _, m := range carried {
			if m.Old == m.New {
				fmt.Fprintf(&b, "  %s (%s)\n", m.Old, m.Kind)
			} else {
				fmt.Fprintf(&b, "  %s -> %s (%s)\n", m.Old, m.New, m.Kind)
			}
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing the compatibility report: %w", err)
	}
	return nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
