package setdigest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"testing"
)

// inMemoryDigest is the digest setDigest must give: the lines sorted,
// each followed by '\n', hashed.
func inMemoryDigest(lines []string) string {
	s := slices.Clone(lines)
	sort.Strings(s)
	h := sha256.New()
	for _, l := range s {
		h.Write([]byte(l + "\n"))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// TestSetDigest: the digest of a set of lines does not depend on their
// order nor on how many run files the memory bound makes it spill to
// (none, one, many, more than it keeps open at once, with duplicates and
// lines that prefix others), and the run files are gone after Close.
func TestSetDigest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var lines []string
	for i := range 5000 {
		lines = append(lines, fmt.Sprintf(`{"k":"k%d","n":%d}`, r.IntN(700), i%13))
	}
	lines = append(lines, `{"k":"k1"`, `{"k":"k1"`, "", `{`) // duplicates, prefixes, empty
	want := inMemoryDigest(lines)
	for _, tc := range []struct {
		name     string
		maxBytes int
		runs     bool
	}{
		{name: "in memory", maxBytes: 0},
		{name: "one spill", maxBytes: 80_000, runs: true},
		{name: "many spills", maxBytes: 3_000, runs: true},
		{name: "more runs than it keeps", maxBytes: 400, runs: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shuffled := slices.Clone(lines)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			d := New(tc.maxBytes)
			for _, l := range shuffled {
				if err := d.Add(l); err != nil {
					t.Fatal(err)
				}
			}
			if (len(d.runs) > 0) != tc.runs || len(d.runs) > maxRuns {
				t.Errorf("%d run files, want some: %v, at most %d", len(d.runs), tc.runs, maxRuns)
			}
			got, err := d.Sum()
			if err != nil {
				t.Fatal(err)
			}
			if got != want || d.Len() != int64(len(lines)) {
				t.Errorf("digest %s of %d lines, want %s of %d", got, d.Len(), want, len(lines))
			}
			tmp := d.tmp
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			if tmp != "" {
				if _, err := os.Stat(tmp); !os.IsNotExist(err) {
					t.Errorf("the run files' directory %s stays after Close: %v", tmp, err)
				}
			}
		})
	}
}
