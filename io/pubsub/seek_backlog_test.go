package pubsub

import "testing"

// TestRetainedAfter: a sought subscription's backlog is what the topic
// retains after the new floor, less what a snapshot restored as
// acknowledged, whatever the subscription's own (lazily recalculated)
// pending count says.
func TestRetainedAfter(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		first, last, msgs, floor uint64
		acked                    []SeqRange
		want                     uint64
	}{
		{name: "to the beginning", first: 1, last: 5, msgs: 5, floor: 0, want: 5},
		{name: "to a snapshot", first: 1, last: 5, msgs: 5, floor: 3, want: 2},
		{name: "to the future", first: 1, last: 5, msgs: 5, floor: 5, want: 0},
		{name: "beyond the end", first: 1, last: 5, msgs: 5, floor: 9, want: 0},
		{name: "before what is retained", first: 101, last: 150, msgs: 50, floor: 20, want: 50},
		{name: "empty topic", first: 6, last: 5, msgs: 0, floor: 0, want: 0},
		{name: "acknowledged runs above the floor", first: 1, last: 10, msgs: 10, floor: 2,
			acked: []SeqRange{{First: 4, Last: 5}, {First: 9, Last: 12}}, want: 4},
		{name: "acknowledged runs below the floor count for nothing", first: 1, last: 10, msgs: 10, floor: 6,
			acked: []SeqRange{{First: 1, Last: 3}}, want: 4},
		{name: "interior deletions bound it", first: 1, last: 10, msgs: 4, floor: 0, want: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := retainedAfter(tc.first, tc.last, tc.msgs, tc.floor, tc.acked); got != tc.want {
				t.Errorf("retainedAfter(%d, %d, %d, %d, %v) = %d, want %d", tc.first, tc.last, tc.msgs, tc.floor, tc.acked, got, tc.want)
			}
		})
	}
}
