package sandbox

import (
	"bytes"
	"os"
	"testing"
)

// FuzzReadEvents checks that any events file reads into a trace or an
// error naming the problem, never a panic, and that a trace it reads has
// watermarks that never move back per source.
func FuzzReadEvents(f *testing.F) {
	fixture, err := os.ReadFile("testdata/fixture.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(fixture)
	f.Add([]byte(`{"element": {"a": 1}, "event_time": 5, "source": "S"}` + "\n" + `{"watermark": "+inf"}`))
	f.Add([]byte(`{"watermark": -9223372036854775808}`))
	f.Add([]byte("# comment\n\n{\"element\": {}, \"event_time\": \"2026-03-01T00:00:00.5+01:00\"}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := ReadEvents(bytes.NewReader(data), "events.jsonl")
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		last := map[string]int64{}
		seen := map[string]bool{}
		evs, err := tr.Events()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if !ev.IsWatermark {
				if ev.Value == nil {
					t.Fatalf("an element without a value: %+v", ev)
				}
				continue
			}
			if seen[ev.Source] && int64(ev.Watermark) < last[ev.Source] {
				t.Fatalf("the watermark of %q moves back: %d after %d", ev.Source, ev.Watermark, last[ev.Source])
			}
			seen[ev.Source], last[ev.Source] = true, int64(ev.Watermark)
		}
	})
}
