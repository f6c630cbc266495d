package api

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weir-dev/weir/io/pubsub"
)

// fakeBroker answers the subscription list and message times; the other
// PubSub methods are not called (nil embedded interface).
type fakeBroker struct {
	PubSub
	subs    []pubsub.SubscriptionInfo
	listErr error
	times   map[uint64]time.Time // by sequence
}

func (f fakeBroker) ListSubscriptions(context.Context, string) ([]pubsub.SubscriptionInfo, error) {
	return f.subs, f.listErr
}

func (f fakeBroker) MessageTime(_ context.Context, _ string, seq uint64) (time.Time, bool, error) {
	t, ok := f.times[seq]
	return t, ok, nil
}

func TestCollectSubscriptions(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	type sample struct {
		name, sub string
		v         float64
	}
	tests := []struct {
		name string
		ps   fakeBroker
		want []sample
	}{
		{"no backlog: age 0", fakeBroker{subs: []pubsub.SubscriptionInfo{{Name: "s", Topic: "t", AckFloor: 9}}},
			[]sample{{"weir_subscription_backlog_messages", "s", 0}, {"weir_subscription_oldest_unacked_message_age_seconds", "s", 0}}},
		{"a backlog: the age of the message after the floor", fakeBroker{
			subs:  []pubsub.SubscriptionInfo{{Name: "s", Topic: "t", Backlog: 3, AckFloor: 7}},
			times: map[uint64]time.Time{8: now.Add(-42 * time.Second), 9: now.Add(-time.Second)}},
			[]sample{{"weir_subscription_backlog_messages", "s", 3}, {"weir_subscription_oldest_unacked_message_age_seconds", "s", 42}}},
		{"the oldest gone from retention: no age", fakeBroker{subs: []pubsub.SubscriptionInfo{{Name: "s", Topic: "t", Backlog: 1, AckFloor: 7}}},
			[]sample{{"weir_subscription_backlog_messages", "s", 1}}},
		{"no answer: nothing", fakeBroker{listErr: errors.New("timeout")}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []sample
			collectSubscriptions(context.Background(), func(m int, v float64, labels ...string) {
				if len(labels) != 2 || labels[1] != "t" {
					t.Fatalf("labels %q", labels)
				}
				got = append(got, sample{metricDefs[m].Name, labels[0], v})
			}, tc.ps, now)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("sample %d: %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}
