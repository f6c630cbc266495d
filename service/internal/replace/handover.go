package replace

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/state"
)

// handoverBroker is what positioning a handed-over subscription needs of
// the broker.
type handoverBroker interface {
	Subscription(ctx context.Context, name string) (contract.SubscriptionInfo, error)
	EnsureSubscription(ctx context.Context, name, topic string, cfg contract.SubscriptionConfig) (contract.SubscriptionInfo, error)
	SeekToSequence(ctx context.Context, sub string, seq uint64) error
	DeleteSubscription(ctx context.Context, name string) error
}

// topicOf returns the topic a topic source step reads, "" for any other
// step.
func topicOf(st *graph.Step) string {
	if st.Kind != graph.KindSource || st.Source == nil || st.Source.Kind != core.PubSubSourceKind {
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
func handoverSubscriptions(old *record.Job, newName string, g *graph.Pipeline) ([]record.SubscriptionHandover, error) {
	og, err := graph.Parse(old.Graph)
	if err != nil {
		return nil, errcode.Internalf("job %s: its graph does not parse: %w", old.ID, err)
	}
	byTopic := map[string][]string{} // topic -> old steps reading it
	instead := map[string]string{}   // a named subscription -> the old step reading its own in place of it
	for _, st := range og.Steps {
		if t := topicOf(st); t != "" {
			byTopic[t] = append(byTopic[t], st.Name)
		}
		if sub, ok := namedSubscriptionOf(st); ok && old.Subscriptions[st.Name] != "" {
			instead[sub] = st.Name
		}
	}
	oldSub := func(step string) string {
		if sub, ok := old.Subscriptions[step]; ok {
			return sub
		}
		return contract.SubscriptionName(old.Name, step)
	}
	var out []record.SubscriptionHandover
	for _, st := range g.Steps {
		if sub, ok := namedSubscriptionOf(st); ok {
			if from, ok := instead[sub]; ok {
				out = append(out, record.SubscriptionHandover{Step: st.Name, Old: oldSub(from), New: contract.SubscriptionName(newName, st.Name), InsteadOf: sub})
			}
			continue
		}
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
				return nil, errcode.Errorf(errcode.ReplacementUnavailable, "step %s of the new pipeline reads topic %s, which job %s (%s) reads through several steps (%s): name the step after one of them, so its position is handed over; job %s was not changed",
					st.Name, t, old.Name, old.ID, strings.Join(steps, ", "), old.ID)
			}
		default:
			return nil, errcode.Errorf(errcode.ReplacementUnavailable, "step %s of the new pipeline reads topic %s, which job %s (%s) does not read, so there is no position to start it at: add the source in an update after the replacement; job %s was not changed",
				st.Name, t, old.Name, old.ID, old.ID)
		}
		out = append(out, record.SubscriptionHandover{Step: st.Name, Topic: t, Old: oldSub(from), New: contract.SubscriptionName(newName, st.Name)})
	}
	return out, nil
}

// positionHandover creates the new job's subscriptions of a
// stop-and-replace under a new name and positions them: at first (a
// sequence per old subscription: the rewind point's) when given, else
// where the old job's subscription stopped (its acknowledgement floor; the
// old job has ended and committed). Positioning again gives the same
// result, so a flow resumed after a crash repeats it.
func (s *Replace) positionHandover(ctx context.Context, nj *record.Job, first map[string]uint64) error {
	hb, ok := s.Opts.Broker.(handoverBroker)
	if !ok {
		return errcode.Errorf(errcode.ReplacementUnavailable, "job %s reads Pub/Sub topics under a new name, which needs the server's Pub/Sub broker", nj.ID)
	}
	hs := nj.Replacement.Handover
	if len(hs) == 0 || hs[0].Positioned {
		return nil // positioned before a crash: Old may be gone
	}
	for i := range hs {
		h := &hs[i]
		info, err := hb.Subscription(ctx, h.Old)
		if err != nil {
			return errcode.Internalf("reading subscription %s of job %s: %w", h.Old, nj.Replacement.OldJobID, err)
		}
		seq, ok := first[h.Old]
		if !ok {
			seq = info.AckFloor + 1
		}
		if h.Topic == "" {
			h.Topic = info.Topic
		}
		if _, err := hb.EnsureSubscription(ctx, h.New, h.Topic, contract.SubscriptionConfig{AckWait: info.AckWait}); err != nil {
			return errcode.Internalf("creating subscription %s for job %s: %w", h.New, nj.ID, err)
		}
		if err := hb.SeekToSequence(ctx, h.New, seq); err != nil {
			return errcode.Internalf("positioning subscription %s of topic %s at sequence %d: %w", h.New, h.Topic, seq, err)
		}
		s.Opts.Logger.Info("replacement: subscription handed over", "job_id", nj.ID, "subscription", h.New, "from", h.Old, "topic", h.Topic, "first_seq", seq)
	}
	for i := range hs {
		hs[i].Positioned = true
	}
	return s.Update(func(tx *core.Tx) error {
		w := &state.Write{}
		if err := core.PutJSON(w, record.JobKey(nj.ID), nj); err != nil {
			return err
		}
		if err := tx.Apply(w); err != nil {
			return errcode.Internalf("recording the subscriptions of job %s positioned: %w", nj.ID, err)
		}
		return nil
	})
}

// deleteHandedOver deletes the old job's subscriptions that the handover
// of replacement job nj positioned its own from (the service created
// them; the old job has ended and committed, and nothing reads them any
// more, so keeping them would only keep their messages). A named
// subscription of the user's is never handed over, so never deleted. It
// runs before the new job starts, whose start records OldDeleted; a
// resumed cut-over deletes again, finding them gone.
func (s *Replace) deleteHandedOver(ctx context.Context, nj *record.Job) error {
	hb, ok := s.Opts.Broker.(handoverBroker)
	if !ok {
		return nil
	}
	for i := range nj.Replacement.Handover {
		h := &nj.Replacement.Handover[i]
		if h.OldDeleted {
			continue
		}
		if err := hb.DeleteSubscription(ctx, h.Old); err != nil && !errors.Is(err, contract.ErrSubscriptionNotFound) {
			return errcode.Internalf("deleting subscription %s of job %s, handed over to %s: %w", h.Old, nj.Replacement.OldJobID, h.New, err)
		}
		h.OldDeleted = true
		s.Opts.Logger.Info("replacement: old subscription deleted", "job_id", nj.ID, "subscription", h.Old, "old_job_id", nj.Replacement.OldJobID)
	}
	return nil
}

// namedSubscriptionOf returns the subscription a step that reads a named
// one (ReadFromPubSub subscription: S) names; ok false for any other step.
func namedSubscriptionOf(st *graph.Step) (string, bool) {
	if st.Kind != graph.KindSource || st.Source == nil || st.Source.Kind != core.PubSubSourceKind {
		return "", false
	}
	return strings.CutPrefix(st.Source.Identity, "subscription/")
}

// handoverNote says what a handover does, for the replacement's notes.
func handoverNote(hs []record.SubscriptionHandover) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		if h.InsteadOf != "" {
			parts[i] = fmt.Sprintf("%s reads %s in place of the named subscription %s, positioned from %s", h.Step, h.New, h.InsteadOf, h.Old)
			continue
		}
		parts[i] = fmt.Sprintf("%s reads topic %s through %s, positioned from %s", h.Step, h.Topic, h.New, h.Old)
	}
	return "subscriptions handed over: " + strings.Join(parts, "; ") + "; the old job's subscriptions are deleted once the new one is positioned"
}
