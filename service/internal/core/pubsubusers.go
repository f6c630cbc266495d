package core

import (
	"sort"
	"strings"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/yamlpipe"

	"github.com/weir-dev/weir/graph"
)

// PubSubUse is one step of an active job that reads or writes a topic or
// reads a subscription: what a destructive broker request would break.
type PubSubUse struct {
	Job  record.Summary `json:"job"`
	Step string         `json:"step"`
	// Use is "reads subscription S", "reads topic T" or "writes topic T".
	Use string `json:"use"`
}

// PubSubUsers returns the steps of active jobs (not in a final state) that
// read subscription sub, read topic topic (through their own subscription)
// or write topic; "" matches nothing. A topic source's subscription, named
// after the job and step, counts as a subscription it reads, and so does
// the subscription a step reads in place of the one it names
// (job.subscriptions); the named one then does not. Jobs whose
// graph cannot be read are skipped. It takes no lock.
func (s *Core) PubSubUsers(topic, sub string) ([]PubSubUse, error) {
	jobs, err := s.List(StatusActive)
	if err != nil {
		return nil, err
	}
	var uses []PubSubUse
	for _, j := range jobs {
		g, err := graph.Parse(j.Graph)
		if err != nil {
			continue
		}
		for _, st := range g.Steps {
			if src := st.Source; src != nil && src.Kind == "pubsub" {
				kind, name, _ := strings.Cut(src.Identity, "/")
				switch {
				case kind == "subscription" && sub != "" && j.Subscriptions[st.Name] == sub:
					// A parallel replacement gave the step its own
					// subscription in place of the one it names.
					uses = append(uses, PubSubUse{Job: j.Summary(), Step: st.Name, Use: "reads subscription " + sub + " (in place of " + name + ")"})
				case kind == "subscription" && name == sub && sub != "" && j.Subscriptions[st.Name] == "":
					uses = append(uses, PubSubUse{Job: j.Summary(), Step: st.Name, Use: "reads subscription " + name})
				case kind == "topic" && name == topic && topic != "":
					uses = append(uses, PubSubUse{Job: j.Summary(), Step: st.Name, Use: "reads topic " + name})
				case kind == "topic" && sub != "" && (yamlpipe.TopicSubscription(j.Name, st.Name) == sub && j.Subscriptions[st.Name] == "" || j.Subscriptions[st.Name] == sub):
					uses = append(uses, PubSubUse{Job: j.Summary(), Step: st.Name, Use: "reads subscription " + sub + " (of topic " + name + ")"})
				}
			}
			if snk := st.Sink; snk != nil && snk.Kind == "pubsub" && topic != "" && snk.Identity == "topic/"+topic {
				uses = append(uses, PubSubUse{Job: j.Summary(), Step: st.Name, Use: "writes topic " + topic})
			}
		}
	}
	return uses, nil
}

// JobSource is a source step of an active job, as its graph records it.
type JobSource struct {
	JobID   string
	JobName string
	State   record.JobState
	Step    string
	// Kind and Identity say what the step reads: kind "pubsub" with
	// identity "subscription/NAME" or "topic/NAME" (read through the
	// subscription "<job name>--<step>").
	Kind     string
	Identity string
}

// ActiveSources returns the source steps of every RUNNING or DRAINING
// job, by job name then step. It takes no lock.
func (s *Core) ActiveSources() ([]JobSource, error) {
	jobs, err := s.List(StatusActive)
	if err != nil {
		return nil, err
	}
	var out []JobSource
	for _, j := range jobs {
		if j.State != record.StateRunning && j.State != record.StateDraining || len(j.Graph) == 0 {
			continue
		}
		g, err := graph.Parse(j.Graph)
		if err != nil {
			return nil, errcode.Internalf("job %s: its graph does not parse: %w", j.ID, err)
		}
		for _, st := range g.Steps {
			if st.Kind != graph.KindSource || st.Source == nil {
				continue
			}
			out = append(out, JobSource{JobID: j.ID, JobName: j.Name, State: j.State, Step: st.Name,
				Kind: st.Source.Kind, Identity: st.Source.Identity})
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].JobName != out[b].JobName {
			return out[a].JobName < out[b].JobName
		}
		return out[a].Step < out[b].Step
	})
	return out, nil
}

// SourceSubscription returns what a Pub/Sub source step reads in job name,
// from its source identity ("subscription/S" or "topic/T"): the
// subscription and, for a topic, the topic (read through the service's
// subscription of the job and step); ok is false for another identity.
func SourceSubscription(job, step, identity string) (sub, topic string, ok bool) {
	kind, name, _ := strings.Cut(identity, "/")
	switch kind {
	case "subscription":
		return name, "", name != ""
	case "topic":
		return yamlpipe.TopicSubscription(job, step), name, name != ""
	}
	return "", "", false
}
