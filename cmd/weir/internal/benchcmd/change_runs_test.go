package benchcmd

import (
	"fmt"
	"strings"
	"testing"
)

// TestChangeRuns: which query runs in which language for --unbounded's
// --query and --language.
func TestChangeRuns(t *testing.T) {
	yaml, goSDK, both := []bool{false}, []bool{true}, []bool{false, true}
	for _, tc := range []struct {
		name    string
		spec    string
		changes []string
		langs   []bool
		want    string // query/language, space-separated; or the error's words
		wantErr bool
	}{
		{name: "all YAML", spec: "all", langs: yaml, want: "q0/yaml q1/yaml q2/yaml q5/yaml q7/yaml q8/yaml q11/yaml"},
		{name: "all Go", spec: "all", langs: goSDK, want: "q0/go q1/go q2/go q3/go q4/go q5/go q6/go q7/go q8/go q9/go q11/go"},
		{name: "all in both", spec: "all", langs: both,
			want: "q0/yaml q0/go q1/yaml q1/go q2/yaml q2/go q3/go q4/go q5/yaml q5/go q6/go q7/yaml q7/go q8/yaml q8/go q9/go q11/yaml q11/go"},
		{name: "all with changes", spec: "all", changes: []string{"update"}, langs: both, want: "q5/yaml q5/go"},
		{name: "named, both", spec: "q7, q1", langs: both, want: "q7/yaml q7/go q1/yaml q1/go"},
		{name: "Go only query in Go", spec: "q9", langs: goSDK, want: "q9/go"},
		{name: "Go only query in both", spec: "q9", langs: both, want: "q9 has no YAML version", wantErr: true},
		{name: "q12 in Go", spec: "q12", langs: goSDK, want: "q12 has no Go version", wantErr: true},
		{name: "unknown", spec: "q42", langs: yaml, want: "q42 has no YAML version", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs, err := changeRuns(tc.spec, changeFlags{changes: tc.changes}, tc.langs)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, %v; want an error saying %q", runs, err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range runs {
				lang := "yaml"
				if r.goSDK {
					lang = "go"
				}
				got = append(got, fmt.Sprintf("%s/%s", r.query, lang))
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("runs %s, want %s", strings.Join(got, " "), tc.want)
			}
		})
	}
}
