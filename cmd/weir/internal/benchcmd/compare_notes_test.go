package benchcmd

import (
	"slices"
	"testing"
)

// TestNexmarkResultNotes: a query whose result count differs between the
// builds is named, with both counts; the generator's count (bids drawn)
// and queries the base did not run are not.
func TestNexmarkResultNotes(t *testing.T) {
	this := []NexmarkResult{
		{Query: generatorOnly, Workers: 1, Results: 10},
		{Query: "q4", Workers: 1, Results: 110},
		{Query: "yaml-q4", Workers: 1, Results: 108},
		{Query: "yaml-q4", Workers: 2, Results: 110},
		{Query: "q12", Workers: 1, Results: 5},
	}
	base := []NexmarkResult{
		{Query: generatorOnly, Workers: 1, Results: 11},
		{Query: "q4", Workers: 1, Results: 110},
		{Query: "yaml-q4", Workers: 1, Results: 110},
		{Query: "yaml-q4", Workers: 2, Results: 110},
	}
	want := []string{"yaml-q4 w1: this build output 108 results, the base 110"}
	if got := nexmarkResultNotes(this, base); !slices.Equal(got, want) {
		t.Errorf("notes %q, want %q", got, want)
	}
	if got := nexmarkResultNotes(base, base); len(got) != 0 {
		t.Errorf("the same results give notes %q", got)
	}
}
