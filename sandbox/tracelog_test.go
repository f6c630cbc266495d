package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/mtime"
)

// TestTraceLogRoundTrip: every field of a recorded event — a Pub/Sub
// message with its payload, ID, attributes, publish time and deliveries,
// an element's JSON value, a watermark move — reads back as it was
// appended, from memory and after the log spilled to disk; the spill
// file is unlinked (nothing left in its directory) and released by Close.
func TestTraceLogRoundTrip(t *testing.T) {
	for _, budget := range []int64{0, 1} {
		t.Run(fmt.Sprintf("budget=%d", budget), func(t *testing.T) {
			dir := t.TempDir()
			tr := &Trace{MaxMemory: budget, SpillDir: dir}
			tr.log.chunk = 512
			var want []Event
			pt := time.Date(2026, 12, 4, 7, 21, 0, 123456789, time.UTC)
			for i := range 300 {
				var ev Event
				switch i % 3 {
				case 0:
					m := &pubsub.Message{Topic: "orders", Data: []byte(fmt.Sprintf(`{"key":"k%d","amount":%d}`, i%7, i)),
						ID: fmt.Sprintf("id-%d", i), Sequence: uint64(i + 1), PublishTime: pt.Add(time.Duration(i) * time.Millisecond), NumDelivered: 1}
					if i%2 == 0 {
						m.Attributes = map[string]string{"region": "EAST", "n": fmt.Sprint(i)}
					}
					ev = Event{Source: "Orders", Message: m, Origin: "orders", Offset: int64(i + 1)}
				case 1:
					ev = Event{Source: "Orders", Watermark: mtime.Time(i * 1000), IsWatermark: true, Origin: "orders", Offset: int64(i)}
				default:
					ev = Event{Source: "ReadEvents", Value: map[string]any{"region": "NORTH", "amount": json.Number(fmt.Sprint(i)), "tags": []any{"a", json.Number("1")}},
						Time: mtime.Time(i), Origin: "events.jsonl", Offset: int64(i)}
				}
				if err := tr.Append(ev); err != nil {
					t.Fatal(err)
				}
				want = append(want, ev)
			}
			if spilled := tr.Spilled(); (budget == 1) != (spilled > 0) {
				t.Errorf("budget %d: %d bytes spilled", budget, spilled)
			}
			// Every chunk but the last spills under a budget of 1 byte.
			if size, spilled := tr.Size(), tr.Spilled(); size == 0 || size < spilled || budget == 1 && size-spilled > 512 {
				t.Errorf("budget %d: the trace's size %d, %d bytes of it spilled", budget, size, spilled)
			}
			got, err := tr.Events()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				for i := range want {
					if !reflect.DeepEqual(got[i], want[i]) {
						t.Fatalf("event %d:\n got %+v %+v\nwant %+v %+v", i, got[i], got[i].Message, want[i], want[i].Message)
					}
				}
				t.Fatalf("%d events, want %d", len(got), len(want))
			}
			if tr.Elements() != 200 || tr.Len() != 300 {
				t.Errorf("elements %d of %d events, want 200 of 300", tr.Elements(), tr.Len())
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("the spill left files behind: %v", ents)
			}
			if err := tr.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Event(0); budget == 1 && (err == nil || !strings.Contains(err.Error(), "closed")) {
				t.Errorf("reading a spilled event after Close: %v", err)
			}
		})
	}
}

// TestAppendEventsSpills: an events file read into a trace with a small
// budget spills, and reads back exactly as ReadEvents' in-memory trace.
func TestAppendEventsSpills(t *testing.T) {
	var b strings.Builder
	for i := range 200 {
		fmt.Fprintf(&b, `{"element": {"region": "NORTH", "amount": %d, "note": %q}, "event_time": %d}`+"\n", i, strings.Repeat("n", 100), i*1000)
		if i%10 == 9 {
			fmt.Fprintf(&b, `{"watermark": %d}`+"\n", i*1000)
		}
	}
	inMem, err := ReadEvents(strings.NewReader(b.String()), "events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer inMem.Close()
	dir := t.TempDir()
	spilled := &Trace{MaxMemory: 1024, SpillDir: dir}
	spilled.log.chunk = 1024
	defer spilled.Close()
	if err := spilled.AppendEvents(strings.NewReader(b.String()), "events.jsonl"); err != nil {
		t.Fatal(err)
	}
	if inMem.Spilled() != 0 || spilled.Spilled() == 0 || spilled.Size() != inMem.Size() {
		t.Fatalf("in memory %d of %d bytes spilled, under a 1 KiB budget %d of %d", inMem.Spilled(), inMem.Size(), spilled.Spilled(), spilled.Size())
	}
	want, err := inMem.Events()
	if err != nil {
		t.Fatal(err)
	}
	got, err := spilled.Events()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || spilled.Elements() != 200 || !reflect.DeepEqual(spilled.inputSums(), inMem.inputSums()) {
		t.Errorf("the spilled trace reads back %d events (%d elements, sums %v), want %d (200, sums %v)", len(got), spilled.Elements(), spilled.inputSums(), len(want), inMem.inputSums())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the spill left files behind: %v", ents)
	}
}

// TestCheckSpillDir: a spill directory must exist, be a directory and
// take files; the empty one (the system's temporary directory) is not
// checked, and the check leaves nothing behind.
func TestCheckSpillDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	readOnly := filepath.Join(dir, "ro")
	if err := os.Mkdir(readOnly, 0o500); err != nil {
		t.Fatal(err)
	}
	good := t.TempDir()
	tests := []struct {
		name, dir, want string
	}{
		{"the system's temporary directory", "", ""},
		{"an existing directory", good, ""},
		{"a missing directory", filepath.Join(dir, "missing"), "directory " + filepath.Join(dir, "missing") + " does not exist"},
		{"a file", file, file + " is not a directory"},
		{"a read-only directory", readOnly, "no file can be created in directory " + readOnly},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.dir == readOnly && os.Geteuid() == 0 {
				t.Skip("root writes into a read-only directory")
			}
			err := CheckSpillDir(tt.dir)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("CheckSpillDir(%q) = %v, want %q", tt.dir, err, tt.want)
			}
		})
	}
	if ents, _ := os.ReadDir(good); len(ents) != 0 {
		t.Errorf("the check left %v behind", ents)
	}
}
