package main

import (
	"strings"
	"testing"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/service"
)

// TestDescribeSubscriptions: weir jobs describe shows the subscriptions a
// replacement gave a job's steps, and for a step that names a
// subscription, that it reads the service's in place of it.
func TestDescribeSubscriptions(t *testing.T) {
	g := &graph.Pipeline{Steps: []*graph.Step{
		{Name: "Events", Kind: graph.KindSource, Source: &graph.IOIdentity{Kind: "pubsub", Identity: "subscription/par-sub"}},
		{Name: "Clicks", Kind: graph.KindSource, Source: &graph.IOIdentity{Kind: "pubsub", Identity: "topic/clicks"}},
	}}
	raw, err := g.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		subs map[string]string
		want string
	}{
		{"none", nil, ""},
		{"named and topic", map[string]string{"Events": "sums--g2--Events", "Clicks": "sums--g2--Clicks"},
			"Clicks reads sums--g2--Clicks (created by the service); Events reads sums--g2--Events (created by the service) in place of the named subscription par-sub, which it does not read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := &service.Job{ID: "j1", Name: "sums", Graph: raw, Subscriptions: tc.subs}
			if got := describeSubscriptions(j); got != tc.want {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
			var b strings.Builder
			if err := describeJob(&b, j, false); err != nil {
				t.Fatal(err)
			}
			if has := strings.Contains(b.String(), "Subscriptions:"); has != (tc.want != "") {
				t.Fatalf("describe shows a Subscriptions row %v, want %v:\n%s", has, tc.want != "", b.String())
			}
		})
	}
}
