package yamlpipe

import (
	"errors"
	"strings"
	"testing"
)

// Aliases are counted by the bytes they expand to, against a budget
// proportional to the text (alias_bytes): one anchored string aliased many
// times is refused at the alias that passes it, with a file position,
// before the loader builds anything from the expanded tree (issue 22: a
// 7 MB string aliased 1,000 times took a server to 3 GiB).
func TestAliasBytesBudget(t *testing.T) {
	big := strings.Repeat("y", 100_000)
	tests := []struct {
		name, src, want string
	}{
		{"string aliased past the budget", "a: &x '" + big + "'\nb: [" + strings.Repeat("*x, ", 11) + "*x]\n",
			"f.yaml:2:49: alias *x passes the alias_bytes budget: the YAML's text with its aliases expanded would exceed 1248698 bytes (1 MiB plus 2 times the file's 100061 bytes)"},
		{"mapping aliased past the budget", "a: &x {k: '" + big + "', l: '" + big + "'}\nb: [" + strings.Repeat("*x, ", 8) + "*x]\n",
			"f.yaml:2:29: alias *x passes the alias_bytes budget"},
		{"small values aliased often", "a: &x {k: v, l: w}\nb: [" + strings.Repeat("*x, ", 999) + "*x]\n", ""},
		{"a large value aliased once", "a: &x '" + big + "'\nb: *x\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = parseYAML("f.yaml", []byte(tc.src)) })
			if tc.want == "" {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if !errors.Is(err, ErrBudgetExceeded) {
				t.Errorf("err = %v, want one matching ErrBudgetExceeded", err)
			}
			// The refusal costs about what parsing the text does (about 60
			// bytes a byte for a long quoted scalar), not the expansion.
			if limit := uint64(1<<20 + 100*len(tc.src)); n > limit {
				t.Errorf("refusing %d bytes allocated %d, more than %d", len(tc.src), n, limit)
			}
		})
	}
}
