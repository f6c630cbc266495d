package files

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

func readAll(t *testing.T, src *Source) []contract.Element {
	t.Helper()
	splits, err := src.Split(context.Background(), 4)
	if err != nil {
		t.Fatal(err)
	}
	var out []contract.Element
	for _, sp := range splits {
		buf := make([]contract.Element, 2)
		for {
			res, err := sp.Read(context.Background(), buf)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, buf[:res.N]...)
			if res.Done {
				break
			}
		}
		sp.Close()
	}
	return out
}

func TestJSONSource(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "in.jsonl")
	os.WriteFile(path, []byte("{\"a\":1,\"ts\":\"2026-03-01T00:00:00Z\"}\r\n[1]\n{\"a\":\"x\",\"ts\":5}\n{\"a\":2}\n{\"a\":3,\"ts\":7} extra\n"), 0o644)
	s := row.MustSchema(row.Field{Name: "a", Type: row.Of(row.KindInt)}, row.Field{Name: "ts", Type: row.Of(row.KindTimestamp)})
	got := readAll(t, NewSource(SourceConfig{Step: "R", Path: path, Schema: s, TimestampField: 1}))
	want := []string{"ok", ReasonMalformedJSON, ReasonSchemaMismatch, ReasonBadTimestamp, ReasonMalformedJSON}
	if len(got) != len(want) {
		t.Fatalf("got %d elements, want %d", len(got), len(want))
	}
	for i, e := range got {
		reason := "ok"
		if rj, ok := e.Value.(contract.Reject); ok {
			reason = rj.Reason
			if rj.Step != "R" || rj.Source.Offset != int64(i+1) {
				t.Errorf("reject %d: %+v", i, rj)
			}
		}
		if reason != want[i] || e.Source.Offset != int64(i+1) {
			t.Errorf("element %d: reason %s at line %d, want %s at %d", i, reason, e.Source.Offset, want[i], i+1)
		}
	}
	if got[0].Time != mtime.Time(1772323200000) {
		t.Errorf("event time %v", got[0].Time)
	}
}

func TestSinkConcurrentWrites(t *testing.T) {
	dir := t.TempDir()
	s := row.MustSchema(row.Field{Name: "w", Type: row.Of(row.KindInt)}, row.Field{Name: "s", Type: row.Of(row.KindString)})
	for _, format := range []Format{JSONLines, CSV} {
		path := filepath.Join(dir, "sub", "out")
		sink := NewSink(path, format, s)
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					r := &row.Row{Schema: s, Values: []any{int64(w), "a,\"b\""}}
					if err := sink.Write(context.Background(), w, []contract.Element{{Value: r}}); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		if err := sink.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		n := 200
		if format == CSV {
			n++
			if lines[0] != "w,s" || lines[1] != `0,"a,""b"""` && !strings.HasSuffix(lines[1], `,"a,""b"""`) {
				t.Errorf("csv = %q", lines[:2])
			}
		}
		if len(lines) != n {
			t.Errorf("format %d: %d lines, want %d", format, len(lines), n)
		}
	}
}

// TestTimestampInSeconds: a numeric timestamp below 10^11 is seconds, not
// milliseconds: a timestamp_in_seconds reject with a hint, in JSON lines and
// CSV, for the event-time field and any other timestamp field.
func TestTimestampInSeconds(t *testing.T) {
	dir := t.TempDir()
	s := row.MustSchema(row.Field{Name: "a", Type: row.Of(row.KindInt)}, row.Field{Name: "ts", Type: row.Of(row.KindTimestamp)})
	for _, c := range []struct {
		name, data string
		format     Format
		tsField    int
	}{
		{"json", "{\"a\":1,\"ts\":1772323200}\n{\"a\":2,\"ts\":1772323200000}\n", JSONLines, 1},
		{"json other field", "{\"a\":1,\"ts\":1772323200}\n{\"a\":2,\"ts\":1772323200000}\n", JSONLines, -1},
		{"csv", "a,ts\n1,1772323200\n2,1772323200000\n", CSV, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
			if err := os.WriteFile(path, []byte(c.data), 0o644); err != nil {
				t.Fatal(err)
			}
			got := readAll(t, NewSource(SourceConfig{Step: "R", Path: path, Format: c.format, Schema: s, TimestampField: c.tsField}))
			if len(got) != 2 {
				t.Fatalf("got %d elements, want 2", len(got))
			}
			rj, ok := got[0].Value.(contract.Reject)
			if !ok || rj.Reason != ReasonTimestampInSeconds || !strings.Contains(rj.Message, "seconds") || !strings.Contains(rj.Message, "1772323200000") {
				t.Errorf("seconds: %+v, want a timestamp_in_seconds reject with the millisecond hint", got[0].Value)
			}
			if _, ok := got[1].Value.(contract.Reject); ok {
				t.Errorf("milliseconds rejected: %+v", got[1].Value)
			}
		})
	}
}

// TestJSONLineTooLong: a JSON line longer than MaxLineBytes is a
// line_too_long reject holding its first KiB, and the lines after it
// read as before; the file is not held in memory whole.
func TestJSONLineTooLong(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.jsonl")
	long := `{"a": "` + strings.Repeat("x", MaxLineBytes+1000) + `"}`
	if err := os.WriteFile(path, []byte("{\"a\": \"first\"}\n"+long+"\n{\"a\": \"last\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := row.NewSchema(row.Field{Name: "a", Type: row.Of(row.KindString)})
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, NewSource(SourceConfig{Step: "R", Path: path, Schema: s, TimestampField: -1}))
	if len(got) != 3 {
		t.Fatalf("read %d elements, want 3", len(got))
	}
	rj, ok := got[1].Value.(contract.Reject)
	if !ok || rj.Reason != ReasonLineTooLong || len(rj.Element.(string)) != 1<<10 || !strings.Contains(rj.Message, "longer than") {
		t.Fatalf("the long line read as %T %v", got[1].Value, rj.Reason)
	}
	for i, want := range map[int]string{0: "first", 2: "last"} {
		if r, ok := got[i].Value.(*row.Row); !ok || r.Values[0] != want {
			t.Errorf("element %d: %v, want %q", i, got[i].Value, want)
		}
	}
}

// TestCSVRecordTooLong: a CSV record longer than MaxLineBytes (give or
// take the 4 KiB encoding/csv reads ahead) — a quote left open, a file
// without line ends — is a line_too_long reject holding its first KiB
// (read back from the file), at the line it reached; reading goes on at
// the next line (its records keep their line numbers), and typing the
// columns stops before it. encoding/csv alone would hold the rest of the
// file.
func TestCSVRecordTooLong(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open.csv")
	body := "a,b\n1,first\n" + `2,"` + strings.Repeat("x", MaxLineBytes+8<<10) + "\n3,last\n\n" + `4,a"b` + "\n"
	if err := os.WriteFile(open, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	noEnd := filepath.Join(dir, "noend.csv")
	if err := os.WriteFile(noEnd, []byte("a,b\n1,first\n2,"+strings.Repeat("y", MaxLineBytes+8<<10)), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := row.NewSchema(row.Field{Name: "a", Type: row.Of(row.KindInt)}, row.Field{Name: "b", Type: row.Of(row.KindString)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path       string
		want       int    // elements
		rejectLine int64  // the reject's line
		head       string // the reject's element: the record's first KiB
	}{
		{open, 4, 3, `2,"` + strings.Repeat("x", RejectHeadBytes-3)},
		{noEnd, 2, 3, "2," + strings.Repeat("y", RejectHeadBytes-2)},
	} {
		got := readAll(t, NewSource(SourceConfig{Step: "R", Path: tc.path, Format: CSV, Schema: s, TimestampField: -1}))
		if len(got) != tc.want {
			t.Fatalf("%s: read %d elements, want %d", tc.path, len(got), tc.want)
		}
		rj, ok := got[1].Value.(contract.Reject)
		if !ok || rj.Reason != ReasonLineTooLong || rj.Element != tc.head || rj.Source.Offset != tc.rejectLine {
			t.Fatalf("%s: the long record read as %T %+v", tc.path, got[1].Value, rj)
		}
		if r, ok := got[0].Value.(*row.Row); !ok || r.Values[1] != "first" || got[0].Source.Offset != 2 {
			t.Errorf("%s: element 0: %v at line %d, want first at line 2", tc.path, got[0].Value, got[0].Source.Offset)
		}
		if tc.want == 4 {
			if r, ok := got[2].Value.(*row.Row); !ok || r.Values[1] != "last" || got[2].Source.Offset != 4 {
				t.Errorf("%s: element 2: %v at line %d, want last at line 4", tc.path, got[2].Value, got[2].Source.Offset)
			}
			// A record that does not parse, after the reader started
			// again: its reject holds its text, read back from the file.
			if rj, ok := got[3].Value.(contract.Reject); !ok || rj.Reason != ReasonMalformedCSV || rj.Element != `4,a"b` || rj.Source.Offset != 6 {
				t.Errorf("%s: element 3: %+v, want a malformed_csv reject of 4,a\"b at line 6 (after an empty line)", tc.path, got[3].Value)
			}
		}
		header, kinds, err := CSVInfer(tc.path, CSVOptions{})
		if err != nil || len(header) != 2 || kinds[0] != row.KindInt {
			t.Errorf("%s: inferred %v %v, %v; want a int", tc.path, header, kinds, err)
		}
	}
}
