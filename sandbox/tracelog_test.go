package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
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
