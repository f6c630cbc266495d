package service

import (
	"context"
	"fmt"
	"strings"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/io/pubsub"
)

// SubscriptionHandover is one Pub/Sub topic source of a stop-and-replace
// under a new name: the new job's step Step reads Topic through New (the
// subscription named after the new job and its step), which the cut-over
// creates and positions where the old job's subscription Old stopped (with
// weir_replace_rewind=false) or at the rewind point (the default). Under
// the same name the new job reads the old job's subscriptions themselves.
type SubscriptionHandover struct {
	Step  string `json:"step"`
	Topic string `json:"topic"`
	Old   string `json:"old"`
	New   string `json:"new"`
}

// handoverBroker is what positioning a handed-over subscription needs of
// the broker.
type handoverBroker interface {
	Subscription(ctx context.Context, name string) (pubsub.SubscriptionInfo, error)
	EnsureSubscription(ctx context.Context, name, topic string, cfg pubsub.SubscriptionConfig) (pubsub.SubscriptionInfo, error)
	SeekToSequence(ctx context.Context, sub string, seq uint64) error
}

var _ handoverBroker = (*pubsub.Broker)(nil)

// topicOf returns the topic a topic source step reads, "" for any other
// step.
func topicOf(st *graph.Step) string {
	if st.Kind != graph.KindSource || st.Source == nil || st.Source.Kind != pubsubSourceKind {
		return ""
	}
	t, _ := strings.CutPrefix(st.Source.Identity, "topic/")
	if t == st.Source.Identity {
		return ""
	}
	return t
}

// handoverSubscriptions pairs each topic source of the new pipeline g (of
// the job to be named newName) with the subscription through which old
// read that topic: the step of the same name when several read it. A
// topic old does not read has no position to start at and is refused, as
// is a topic old read through several steps none of which has the new
// step's name.
func handoverSubscriptions(old *Job, newName string, g *graph.Pipeline) ([]SubscriptionHandover, error) {
	og, err := graph.Parse(old.Graph)
	if err != nil {
		return nil, internalf("job %s: its graph does not parse: %w", old.ID, err)
	}
	byTopic := map[string][]string{} // topic -> old steps reading it
	for _, st := range og.Steps {
		if t := topicOf(st); t != "" {
			byTopic[t] = append(byTopic[t], st.Name)
		}
	}
	oldSub := func(step string) string {
		if sub, ok := old.Subscriptions[step]; ok {
			return sub
		}
		return pubsub.SubscriptionName(old.Name, step)
	}
	var out []SubscriptionHandover
	for _, st := range g.Steps {
		t := topicOf(st)
		if t == "" {
			continue
		}
		steps := byTopic[t]
		var from string
		switch {
		case len(steps) == 1:
			from = steps[0]
		case len(steps) > 1:
			for _, s := range steps {
				if s == st.Name {
					from = s
				}
			}
			if from == "" {
				return nil, errorf(CodeReplacementUnavailable, "step %s of the new pipeline reads topic %s, which job %s (%s) reads through several steps (%s): name the step after one of them, so its position is handed over; job %s was not changed",
					st.Name, t, old.Name, old.ID, strings.Join(steps, ", "), old.ID)
			}
		default:
			return nil, errorf(CodeReplacementUnavailable, "step %s of the new pipeline reads topic %s, which job %s (%s) does not read, so there is no position to start it at: add the source in an update after the replacement; job %s was not changed",
				st.Name, t, old.Name, old.ID, old.ID)
		}
		out = append(out, SubscriptionHandover{Step: st.Name, Topic: t, Old: oldSub(from), New: pubsub.SubscriptionName(newName, st.Name)})
	}
	return out, nil
}

// positionHandover creates the new job's subscriptions of a
// stop-and-replace under a new name and positions them: at first (a
// sequence per old subscription: the rewind point's) when given, else
// where the old job's subscription stopped (its acknowledgement floor; the
// old job has ended and committed). Positioning again gives the same
// result, so a flow resumed after a crash repeats it.
func (s *Service) positionHandover(ctx context.Context, nj *Job, first map[string]uint64) error {
	hb, ok := s.opts.Broker.(handoverBroker)
	if !ok {
		return errorf(CodeReplacementUnavailable, "job %s reads Pub/Sub topics under a new name, which needs the server's Pub/Sub broker", nj.ID)
	}
	for _, h := range nj.Replacement.Handover {
		info, err := hb.Subscription(ctx, h.Old)
		if err != nil {
			return internalf("reading subscription %s of job %s: %w", h.Old, nj.Replacement.OldJobID, err)
		}
		seq, ok := first[h.Old]
		if !ok {
			seq = info.AckFloor + 1
		}
		if _, err := hb.EnsureSubscription(ctx, h.New, h.Topic, pubsub.SubscriptionConfig{AckWait: info.AckWait}); err != nil {
			return internalf("creating subscription %s for job %s: %w", h.New, nj.ID, err)
		}
		if err := hb.SeekToSequence(ctx, h.New, seq); err != nil {
			return internalf("positioning subscription %s of topic %s at sequence %d: %w", h.New, h.Topic, seq, err)
		}
		s.opts.Logger.Info("replacement: subscription handed over", "job_id", nj.ID, "subscription", h.New, "from", h.Old, "topic", h.Topic, "first_seq", seq)
	}
	return nil
}

// handoverNote says what a handover does, for the replacement's notes.
func handoverNote(hs []SubscriptionHandover) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = fmt.Sprintf("%s reads topic %s through %s, positioned from %s", h.Step, h.Topic, h.New, h.Old)
	}
	return "subscriptions handed over: " + strings.Join(parts, "; ")
}
