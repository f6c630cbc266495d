package pubsub

import (
	"context"
	"strings"
	"testing"
)

// TestPublishIDConflict: a publish that repeats a stored message's ID is
// a duplicate; when its data differs it is an ID conflict, dropped all the
// same and counted per topic (attributes may differ on a retry).
func TestPublishIDConflict(t *testing.T) {
	ctx := context.Background()
	b := newTestBroker(t)
	if _, err := b.CreateTopic(ctx, "orders", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", recentIDMaxBytes+1) // not remembered by the broker
	steps := []struct {
		name          string
		data          string
		attrs         map[string]string
		id            string
		wantDuplicate bool
		wantConflict  bool
	}{
		{name: "first", data: `{"n":1}`, attrs: map[string]string{"source": "a"}, id: "o1"},
		{name: "the same again", data: `{"n":1}`, attrs: map[string]string{"source": "a"}, id: "o1", wantDuplicate: true},
		{name: "other data", data: `{"n":2}`, attrs: map[string]string{"source": "a"}, id: "o1", wantDuplicate: true, wantConflict: true},
		{name: "other data, no attributes", data: `{"n":3}`, id: "o1", wantDuplicate: true, wantConflict: true},
		{name: "other attributes", data: `{"n":1}`, attrs: map[string]string{"source": "b"}, id: "o1", wantDuplicate: true},
		{name: "a new ID", data: `{"n":2}`, id: "o2"},
		{name: "a long ID", data: `{"n":4}`, id: long},
		{name: "a long ID, other data (compared with the stored message)", data: `{"n":5}`, id: long, wantDuplicate: true, wantConflict: true},
		{name: "a long ID again", data: `{"n":4}`, id: long, wantDuplicate: true},
		{name: "no ID", data: `{"n":1}`},
	}
	for _, st := range steps {
		res, err := b.Publish(ctx, "orders", []byte(st.data), st.attrs, st.id)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if res.Duplicate != st.wantDuplicate || res.IDConflict != st.wantConflict {
			t.Errorf("%s: duplicate %v, conflict %v; want %v, %v", st.name, res.Duplicate, res.IDConflict, st.wantDuplicate, st.wantConflict)
		}
	}
	if got := b.DuplicateIDConflicts(); len(got) != 1 || got["orders"] != 3 {
		t.Errorf("DuplicateIDConflicts = %v, want orders: 3", got)
	}
	// A broker that did not publish the ID itself (restarted, or another
	// process on a shared server) compares with the stored message.
	for _, st := range []struct {
		data         string
		wantConflict bool
	}{{`{"n":9}`, true}, {`{"n":1}`, false}} {
		b.recent.mu.Lock()
		b.recent.seen = nil
		b.recent.mu.Unlock()
		res, err := b.Publish(ctx, "orders", []byte(st.data), nil, "o1")
		if err != nil {
			t.Fatal(err)
		}
		if !res.Duplicate || res.IDConflict != st.wantConflict {
			t.Errorf("%s against the stored o1: duplicate %v, conflict %v; want true, %v", st.data, res.Duplicate, res.IDConflict, st.wantConflict)
		}
	}
	msgs, err := b.Pull(ctx, mustSub(t, b), 10, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 4 || string(msgs[0].Data) != `{"n":1}` { // o1, o2, the long ID and the one without an ID
		t.Errorf("stored %d messages (first %q), want 4, the first {\"n\":1}", len(msgs), msgs[0].Data)
	}
}

// mustSub creates a subscription of topic orders from its beginning.
func mustSub(t *testing.T, b *Broker) string {
	t.Helper()
	if _, err := b.CreateSubscription(context.Background(), "orders-all", "orders", SubscriptionConfig{FromBeginning: true}); err != nil {
		t.Fatal(err)
	}
	return "orders-all"
}
