package plan

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/weir-dev/weir/compat"
)

// WriteText writes p for people: a verdict line, then the stateful steps,
// the sinks with their changed columns, and the sources, one line each
// with what the change does, followed by the compatibility report's
// errors (with their fixes) when the update would be refused.
func (p Plan) WriteText(w io.Writer) error {
	var b strings.Builder
	refused := 0
	for _, s := range p.Sinks {
		if s.Action == Refused {
			refused++
		}
	}
	switch {
	case !p.Compatible:
		fmt.Fprintf(&b, "plan (%s): refused — %d incompatible change(s); nothing would change\n", p.Strategy, len(p.Check.Errors))
	case refused > 0:
		fmt.Fprintf(&b, "plan (%s): the state carries over, but %d sink(s) would refuse the new rows when the job starts (listed below)\n", p.Strategy, refused)
	default:
		fmt.Fprintf(&b, "plan (%s): the update can proceed\n", p.Strategy)
	}
	b.WriteString("\nstate:\n")
	if len(p.Steps) == 0 {
		b.WriteString("  (no stateful steps)\n")
	}
	for _, s := range p.Steps {
		fmt.Fprintf(&b, "  %-9s %s (%s)", s.Action, names(s.Old, s.New), s.Kind)
		if s.State != "" {
			fmt.Fprintf(&b, ": %s", s.State)
		}
		switch {
		case s.Keys != nil && s.OpenWindows != nil:
			approx := ""
			if s.OpenWindowsEstimated {
				approx = "~"
			}
			fmt.Fprintf(&b, " [%d keys, %s%d open windows]", *s.Keys, approx, *s.OpenWindows)
		case s.Keys != nil:
			fmt.Fprintf(&b, " [%d keys]", *s.Keys)
		}
		b.WriteString("\n")
		switch {
		case s.Action == Refused:
			// The reasons and fixes follow at the end, once.
			fmt.Fprintf(&b, "            %s (why and the fix: below)\n", codes(p.Check.Errors, s.Old))
		case s.Detail != "":
			fmt.Fprintf(&b, "            %s\n", s.Detail)
		}
	}
	if p.KeysFrom != "" {
		fmt.Fprintf(&b, "  (key counts from %s)\n", p.KeysFrom)
	}
	b.WriteString("\nsinks:\n")
	if len(p.Sinks) == 0 {
		b.WriteString("  (no sinks)\n")
	}
	for _, s := range p.Sinks {
		fmt.Fprintf(&b, "  %-9s %s (%s %s)\n", s.Action, names(s.Old, s.New), s.Kind, s.Identity)
		for _, c := range []struct {
			label string
			ch    Change
		}{{"key", s.Key}, {"mode", s.Mode}, {"layout", s.Layout}} {
			if c.ch.changed() && c.ch.Old != "" {
				fmt.Fprintf(&b, "            %s: %s → %s\n", c.label, c.ch.Old, c.ch.New)
			}
		}
		for _, c := range s.Columns {
			fmt.Fprintf(&b, "            %s column %s %s: %s\n", sign(c.Action), names(c.From, c.Name), types(c.OldType, c.NewType), c.Effect)
		}
		if s.Detail != "" {
			fmt.Fprintf(&b, "            %s\n", s.Detail)
		}
	}
	b.WriteString("\nsources:\n")
	if len(p.Sources) == 0 {
		b.WriteString("  (no sources)\n")
	}
	for _, s := range p.Sources {
		fmt.Fprintf(&b, "  %-9s %s (%s)\n            %s\n", s.Action, names(s.Old, s.New), s.Identity, s.Position)
	}
	if len(p.Check.Errors) > 0 {
		b.WriteString("\nwhy the update would be refused:\n")
		for _, f := range p.Check.Errors {
			fmt.Fprintf(&b, "  %s %s: %s\n", f.Code, f.Step, f.Reason)
			if f.Fix != "" {
				fmt.Fprintf(&b, "    fix: %s\n", f.Fix)
			}
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing the plan: %w", err)
	}
	return nil
}

// codes lists the codes of the findings about step.
func codes(fs []compat.Finding, step string) string {
	var cs []string
	for _, f := range fs {
		if f.Step == step && !slices.Contains(cs, string(f.Code)) {
			cs = append(cs, string(f.Code))
		}
	}
	return strings.Join(cs, ", ")
}

func names(old, new string) string {
	switch {
	case old == "":
		return new
	case new == "" || new == old:
		return old
	}
	return old + " → " + new
}

func types(old, new string) string {
	switch {
	case old == "":
		return "(" + new + ")"
	case new == "":
		return "(" + old + ")"
	}
	return "(" + old + " → " + new + ")"
}

func sign(a Action) string {
	switch a {
	case Added:
		return "+"
	case Removed:
		return "-"
	case Refused:
		return "!"
	}
	return "~"
}
