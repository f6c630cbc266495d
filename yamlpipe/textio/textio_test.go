package textio

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/io/files"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// TestLineTooLong: a line longer than files.MaxLineBytes is a
// line_too_long reject holding its first KiB, and the lines after it read
// as before (the scanner used to stop the job with "token too long"), for
// the default line ends and for a delimiter of the user's.
func TestLineTooLong(t *testing.T) {
	long := strings.Repeat("x", files.MaxLineBytes+1000)
	for _, tc := range []struct{ name, delim, text string }{
		{"lines", "", "first\r\n" + long + "\nlast\n"},
		{"a delimiter", "||", "first||" + long + "||last"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "in.txt")
			if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			splits, err := (&Source{Path: path, Delim: tc.delim, Schema: Schema()}).Split(context.Background(), 1)
			if err != nil {
				t.Fatal(err)
			}
			var got []contract.Element
			buf := make([]contract.Element, 2)
			for {
				res, err := splits[0].Read(context.Background(), buf)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, buf[:res.N]...)
				if res.Done {
					break
				}
			}
			if len(got) != 3 {
				t.Fatalf("read %d elements, want 3", len(got))
			}
			rj, ok := got[1].Value.(contract.Reject)
			if !ok || rj.Reason != files.ReasonLineTooLong || len(rj.Element.(string)) != 1<<10 || rj.Source.Offset != 2 {
				t.Fatalf("the long line read as %T (%v)", got[1].Value, rj.Reason)
			}
			for i, want := range map[int]string{0: "first", 2: "last"} {
				if r, ok := got[i].Value.(*row.Row); !ok || r.Values[0] != want {
					t.Errorf("element %d: %v, want %q", i, got[i].Value, want)
				}
			}
		})
	}
}
