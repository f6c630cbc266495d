package core

import (
	"errors"
	"fmt"
	"testing"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/runner/contract"
)

// TestRunFailure: the FAILED reason of an execution's failure says how to
// go on from the last committed checkpoint when the job reads Pub/Sub and
// takes checkpoints, and is the error alone otherwise.
func TestRunFailure(t *testing.T) {
	pubsubRead := &graph.Pipeline{Steps: []*graph.Step{{Name: "Events", Kind: graph.KindSource, Source: &graph.IOIdentity{Kind: "pubsub", Identity: "topic/t"}}}}
	fileRead := &graph.Pipeline{Steps: []*graph.Step{{Name: "Lines", Kind: graph.KindSource, Source: &graph.IOIdentity{Kind: "file", Identity: "x.jsonl"}}}}
	broke := errors.New("reading source \"Events\": broker unavailable")
	tests := []struct {
		name         string
		g            *graph.Pipeline
		checkpointed bool
		err          error
		want         string
	}{
		{name: "pubsub, checkpointed", g: pubsubRead, checkpointed: true, err: broke,
			want: broke.Error() + ". Nothing past checkpoint 7, the last the sinks committed, was acknowledged: run the pipeline again under the same job name (weir run PIPELINE --job-name sums), which reads its Pub/Sub subscriptions from there (keyed state, such as windows still open, starts empty)"},
		{name: "pubsub, subscription deleted", g: pubsubRead, checkpointed: true, err: fmt.Errorf("reading: %w", pubsub.ErrSubscriptionNotFound),
			want: "reading: subscription not found. The results up to checkpoint 7, the last the sinks committed, are stored; the messages after it are no longer kept for the job: create the subscription again (weir subscriptions create NAME --topic TOPIC), seek it to the time to reprocess from (weir subscriptions seek NAME --time T), then run the pipeline again (keyed state, such as windows still open, starts empty)"},
		{name: "pubsub, no checkpoints", g: pubsubRead, err: broke, want: broke.Error()},
		{name: "files", g: fileRead, checkpointed: true, err: broke, want: broke.Error()},
	}
	s := &Core{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			jr := &Run{Name: "sums", Prog: &contract.Program{Graph: tc.g}, Checkpointed: tc.checkpointed}
			jr.committed.Store(7)
			if got := s.runFailure(jr, tc.err); got != tc.want {
				t.Errorf("runFailure =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
