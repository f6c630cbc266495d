package api

import (
	"context"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/service"
)

// DefaultMaxObjects is the default of --max-jobs (which the job service
// enforces: service.Options.MaxJobs) and of Limits' fields (--max-topics,
// --max-subscriptions).
const DefaultMaxObjects = 1000

// Limits bound the topics and subscriptions clients may create; 0 (or
// less) is no limit. Jobs are bounded by the job service itself, for every
// way a job is created (service.Options.MaxJobs).
type Limits struct {
	// Topics bounds the topics clients create (dead-letter topics, which
	// jobs create, are not counted).
	Topics int
	// Subscriptions bounds the subscriptions.
	Subscriptions int
}

// WithLimits bounds the topics and subscriptions clients may create
// (LIMIT_EXCEEDED, 409, past a limit). Without it nothing is bounded.
func WithLimits(l Limits) ServerOption {
	return func(s *Server) { s.limits = l }
}

// WithCollector adds c's metrics to GET /metrics (a cluster member's, for
// one: package server).
func WithCollector(c prometheus.Collector) ServerOption {
	return func(s *Server) { s.collectors = append(s.collectors, c) }
}

// creations serialises the creations of one kind of object with their
// limit check, so concurrent requests cannot pass a limit together.
type creations struct {
	topics, subscriptions sync.Mutex
}

// admitTopic checks the topics limit; call with s.creating.topics held.
func (s *Server) admitTopic(ctx context.Context) error {
	if s.limits.Topics <= 0 {
		return nil
	}
	infos, err := s.pubsub.ListTopics(ctx)
	if err != nil {
		return pubsubError(err)
	}
	n := 0
	for _, t := range infos {
		if !strings.HasPrefix(t.Name, pubsub.DeadLetterTopic("")) {
			n++
		}
	}
	if n >= s.limits.Topics {
		return service.NewError(errcode.LimitExceeded, "the server already has %d topics, its limit (--max-topics %d): delete one first, or restart the server with a higher --max-topics", n, s.limits.Topics)
	}
	return nil
}

// admitSubscription checks the subscriptions limit; call with
// s.creating.subscriptions held.
func (s *Server) admitSubscription(ctx context.Context) error {
	if s.limits.Subscriptions <= 0 {
		return nil
	}
	infos, err := s.pubsub.ListSubscriptions(ctx, "")
	if err != nil {
		return pubsubError(err)
	}
	if len(infos) >= s.limits.Subscriptions {
		return service.NewError(errcode.LimitExceeded, "the server already has %d subscriptions, its limit (--max-subscriptions %d): delete one first, or restart the server with a higher --max-subscriptions", len(infos), s.limits.Subscriptions)
	}
	return nil
}
