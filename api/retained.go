package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/service"
)

// RetainedReader is a PubSub that reads a topic's retained messages
// without a subscription (pubsub.Broker.ReadRetained); the route answers
// 503 PUBSUB_UNAVAILABLE without one.
type RetainedReader interface {
	ReadRetained(ctx context.Context, topic string, from uint64, since, until time.Time, max int) (pubsub.RetainedRead, error)
}

var _ RetainedReader = (*pubsub.Broker)(nil)

// RetainedMessages is client.RetainedMessages.
type RetainedMessages = client.RetainedMessages

// readRetained serves GET /v1/topics/{name}/messages: a page of the
// messages the topic retains, read by stream sequence, for a rehearsal
// (nothing is delivered or acknowledged).
func (s *Server) readRetained(w http.ResponseWriter, r *http.Request) {
	rr, ok := s.pubsub.(RetainedReader)
	if !ok {
		s.writeError(w, service.NewError(errcode.PubSubUnavailable, "this server's Pub/Sub broker cannot read retained messages"))
		return
	}
	if err := noQuery(r, "since", "until", "after", "limit"); err != nil {
		s.writeError(w, err)
		return
	}
	q := r.URL.Query()
	var since, until time.Time
	for _, p := range []struct {
		key string
		dst *time.Time
	}{{"since", &since}, {"until", &until}} {
		if v := q.Get(p.key); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				s.writeError(w, service.NewError(errcode.InvalidRequest, "query parameter %s: %q is not an RFC 3339 time", p.key, v))
				return
			}
			*p.dst = t
		}
	}
	var from uint64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			s.writeError(w, service.NewError(errcode.InvalidRequest, "query parameter after: %q is not a stream sequence", v))
			return
		}
		from = n + 1
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > pubsub.MaxRetainedRead {
			s.writeError(w, service.NewError(errcode.InvalidRequest, "query parameter limit: %q is not a number from 1 to %d", v, pubsub.MaxRetainedRead))
			return
		}
		limit = n
	}
	res, err := rr.ReadRetained(r.Context(), r.PathValue("name"), from, since, until, limit)
	if err != nil {
		s.writeError(w, pubsubError(err))
		return
	}
	out := RetainedMessages{Messages: make([]PulledMessage, len(res.Messages)), Next: res.Next, Done: res.Done}
	for i, m := range res.Messages {
		out.Messages[i] = pulledOf(m)
	}
	writeJSON(w, http.StatusOK, out)
}
