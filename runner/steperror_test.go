package runner

import (
	"testing"

	"github.com/weir-dev/weir/runner/contract"
)

// TestStepErrorText: a step's failure names the element's position when it
// has one, and reads as a sentence when it has none (an aggregate).
func TestStepErrorText(t *testing.T) {
	tests := []struct {
		name string
		err  StepError
		want string
	}{
		{name: "with a position", err: StepError{Step: "Parse", Reason: "schema_mismatch", Message: "field a", Source: &contract.SourcePos{Source: "in.jsonl", Offset: 3}},
			want: `step "Parse" failed on the element at in.jsonl:3: schema_mismatch: field a`},
		{name: "an aggregate", err: StepError{Step: "Check", Reason: "assert_equal", Message: "1 missing"},
			want: `step "Check" failed on an element: assert_equal: 1 missing`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
}
