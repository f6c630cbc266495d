package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/service"
)

// The subscription snapshot and seek routes (Pub/Sub's), beside the
// subscription routes:
//
//	POST   /v1/subscription-snapshots          {name, subscription} → 201 snapshot {name, topic, subscription, ack_floor, create_time, expire_time}
//	GET    /v1/subscription-snapshots?topic=T  → {snapshots: [snapshot...]} by name
//	GET    /v1/subscription-snapshots/{name}   → the snapshot
//	DELETE /v1/subscription-snapshots/{name}   → 204
//	POST   /v1/subscriptions/{name}:seek       {snapshot | time (RFC 3339), force?} → {subscription, topic, ack_floor, backlog}
//
// A seek of a subscription that a RUNNING or DRAINING job reads is refused
// with SUBSCRIPTION_IN_USE unless force is true.

// SubscriptionSnapshots is what the snapshot and seek routes need of the
// broker; *pubsub.Broker implements it. A PubSub without it answers those
// routes with PUBSUB_UNAVAILABLE. Methods block until the broker answers or
// ctx is done and are safe for concurrent use.
type SubscriptionSnapshots interface {
	CreateSubscriptionSnapshot(ctx context.Context, name, sub string) (pubsub.SubscriptionSnapshot, error)
	SubscriptionSnapshot(ctx context.Context, name string) (pubsub.SubscriptionSnapshot, error)
	ListSubscriptionSnapshots(ctx context.Context, topic string) ([]pubsub.SubscriptionSnapshot, error)
	DeleteSubscriptionSnapshot(ctx context.Context, name string) error
	Seek(ctx context.Context, sub string, target pubsub.SeekTarget) (pubsub.SeekResult, error)
}

var (
	_ SubscriptionSnapshots     = (*pubsub.Broker)(nil)
	_ service.SourceSnapshotter = (*pubsub.Broker)(nil)
)

// snapshotCode returns the code of a broker error of the snapshot and
// seek routes, or "" when it is none of theirs.
func snapshotCode(err error) errcode.Code {
	switch {
	case errors.Is(err, pubsub.ErrSnapshotNotFound):
		return errcode.SubscriptionSnapshotNotFound
	case errors.Is(err, pubsub.ErrSnapshotExists):
		return errcode.SubscriptionSnapshotExists
	case errors.Is(err, pubsub.ErrSnapshotExpiresTooSoon):
		return errcode.SnapshotExpiresTooSoon
	case errors.Is(err, pubsub.ErrSnapshotTopicMismatch):
		return errcode.SnapshotTopicMismatch
	case errors.Is(err, pubsub.ErrSnapshotTooLarge):
		return errcode.SnapshotTooLarge
	}
	return ""
}

func snapshotError(err error) error {
	if c := snapshotCode(err); c != "" {
		return service.NewError(c, "%w", err)
	}
	return pubsubError(err)
}

// CreateSubscriptionSnapshotRequest is the body of POST
// /v1/subscription-snapshots.
type CreateSubscriptionSnapshotRequest struct {
	Name         string `json:"name"`
	Subscription string `json:"subscription"`
}

// SubscriptionSnapshotList is the reply of GET /v1/subscription-snapshots.
type SubscriptionSnapshotList struct {
	Snapshots []pubsub.SubscriptionSnapshot `json:"snapshots"`
}

// SeekRequest is the body of POST /v1/subscriptions/{name}:seek: a
// snapshot name or an RFC 3339 time.
type SeekRequest struct {
	Snapshot string `json:"snapshot,omitempty"`
	Time     string `json:"time,omitempty"`
	// Force seeks even a subscription a running or draining job reads.
	Force bool `json:"force,omitempty"`
}

func (s *Server) registerSubscriptionSnapshots() {
	s.mux.HandleFunc("POST /v1/subscription-snapshots", s.withSnapshots(s.createSubscriptionSnapshot))
	s.mux.HandleFunc("GET /v1/subscription-snapshots", s.withSnapshots(s.listSubscriptionSnapshots))
	s.mux.HandleFunc("GET /v1/subscription-snapshots/{name}", s.withSnapshots(s.getSubscriptionSnapshot))
	s.mux.HandleFunc("DELETE /v1/subscription-snapshots/{name}", s.withSnapshots(s.deleteSubscriptionSnapshot))
}

func (s *Server) snapshotter() (SubscriptionSnapshots, bool) {
	ss, ok := s.pubsub.(SubscriptionSnapshots)
	return ss, ok && s.pubsub != nil
}

func (s *Server) withSnapshots(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.snapshotter(); !ok {
			s.writeError(w, service.NewError(errcode.PubSubUnavailable, "this weir server's Pub/Sub has no subscription snapshots"))
			return
		}
		h(w, r)
	}
}

func (s *Server) createSubscriptionSnapshot(w http.ResponseWriter, r *http.Request) {
	var req CreateSubscriptionSnapshotRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if req.Name == "" || req.Subscription == "" {
		s.writeError(w, service.NewError(errcode.InvalidRequest, "fields \"name\" and \"subscription\" are required: the snapshot's name and the subscription to snapshot"))
		return
	}
	ss, _ := s.snapshotter()
	snap, err := ss.CreateSubscriptionSnapshot(r.Context(), req.Name, req.Subscription)
	if err != nil {
		s.writeError(w, snapshotError(err))
		return
	}
	w.Header().Set("Location", "/v1/subscription-snapshots/"+snap.Name)
	writeJSON(w, http.StatusCreated, snap)
}

func (s *Server) listSubscriptionSnapshots(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r, "topic"); err != nil {
		s.writeError(w, err)
		return
	}
	ss, _ := s.snapshotter()
	list, err := ss.ListSubscriptionSnapshots(r.Context(), r.URL.Query().Get("topic"))
	if err != nil {
		s.writeError(w, snapshotError(err))
		return
	}
	writeJSON(w, http.StatusOK, SubscriptionSnapshotList{Snapshots: list})
}

func (s *Server) getSubscriptionSnapshot(w http.ResponseWriter, r *http.Request) {
	ss, _ := s.snapshotter()
	snap, err := ss.SubscriptionSnapshot(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeError(w, snapshotError(err))
		return
	}
	writeJSON(w, http.StatusOK, snap)
}

func (s *Server) deleteSubscriptionSnapshot(w http.ResponseWriter, r *http.Request) {
	ss, _ := s.snapshotter()
	if err := ss.DeleteSubscriptionSnapshot(r.Context(), r.PathValue("name")); err != nil {
		s.writeError(w, snapshotError(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// seekSubscription serves POST /v1/subscriptions/{name}:seek (from
// subscriptionAction).
func (s *Server) seekSubscription(w http.ResponseWriter, r *http.Request, name string) {
	ss, ok := s.snapshotter()
	if !ok {
		s.writeError(w, service.NewError(errcode.PubSubUnavailable, "this weir server's Pub/Sub cannot seek"))
		return
	}
	var req SeekRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	var target pubsub.SeekTarget
	switch {
	case req.Snapshot != "" && req.Time != "", req.Snapshot == "" && req.Time == "":
		s.writeError(w, service.NewError(errcode.InvalidRequest, "give exactly one of \"snapshot\" (a subscription snapshot's name) and \"time\" (RFC 3339)"))
		return
	case req.Snapshot != "":
		target.Snapshot = req.Snapshot
	default:
		t, err := time.Parse(time.RFC3339Nano, req.Time)
		if err != nil {
			s.writeError(w, service.NewError(errcode.InvalidRequest, "field \"time\": %q is not an RFC 3339 time (like 2026-12-01T10:00:00Z)", req.Time))
			return
		}
		target.Time = t
	}
	readers, err := s.readersOf(name)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if len(readers) > 0 && !req.Force {
		j := readers[0]
		s.writeError(w, service.NewError(errcode.SubscriptionInUse,
			"subscription %s is read by job %s (%s, %s, step %s): seeking it under the job would break the job's watermark and exactly-once (the job's checkpointed position no longer matches the subscription); drain or cancel the job first, or seek with force",
			name, j.JobName, j.JobID, j.State, j.Step))
		return
	}
	res, err := ss.Seek(r.Context(), name, target)
	if err != nil {
		s.writeError(w, snapshotError(err))
		return
	}
	if len(readers) > 0 {
		s.logger.Warn("subscription sought under a running job (force)", "subscription", name, "job", readers[0].JobName, "job_id", readers[0].JobID)
	}
	writeJSON(w, http.StatusOK, res)
}

// readersOf returns the RUNNING or DRAINING jobs' source steps that read
// subscription sub.
func (s *Server) readersOf(sub string) ([]service.JobSource, error) {
	srcs, err := s.svc.ActiveSources()
	if err != nil {
		return nil, err
	}
	var out []service.JobSource
	for _, src := range srcs {
		if src.Kind != "pubsub" {
			continue
		}
		name, ok := strings.CutPrefix(src.Identity, "subscription/")
		if !ok {
			if _, isTopic := strings.CutPrefix(src.Identity, "topic/"); !isTopic {
				continue
			}
			name = pubsub.SubscriptionName(src.JobName, src.Step)
		}
		if name == sub {
			out = append(out, src)
		}
	}
	return out, nil
}

// CreateSubscriptionSnapshot snapshots subscription req.Subscription as
// req.Name.
func (c *Client) CreateSubscriptionSnapshot(ctx context.Context, req CreateSubscriptionSnapshotRequest) (*pubsub.SubscriptionSnapshot, error) {
	var out pubsub.SubscriptionSnapshot
	if err := c.do(ctx, http.MethodPost, "/v1/subscription-snapshots", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListSubscriptionSnapshots lists the subscription snapshots of topic, or
// of every topic when topic is "", by name.
func (c *Client) ListSubscriptionSnapshots(ctx context.Context, topic string) ([]pubsub.SubscriptionSnapshot, error) {
	path := "/v1/subscription-snapshots"
	if topic != "" {
		path += "?topic=" + url.QueryEscape(topic)
	}
	var out SubscriptionSnapshotList
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return out.Snapshots, nil
}

// GetSubscriptionSnapshot describes subscription snapshot name.
func (c *Client) GetSubscriptionSnapshot(ctx context.Context, name string) (*pubsub.SubscriptionSnapshot, error) {
	var out pubsub.SubscriptionSnapshot
	if err := c.do(ctx, http.MethodGet, "/v1/subscription-snapshots/"+url.PathEscape(name), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSubscriptionSnapshot deletes subscription snapshot name.
func (c *Client) DeleteSubscriptionSnapshot(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/subscription-snapshots/"+url.PathEscape(name), nil, nil)
}

// Seek sets subscription name's acknowledgement state to req's snapshot
// or time.
func (c *Client) Seek(ctx context.Context, name string, req SeekRequest) (*pubsub.SeekResult, error) {
	var out pubsub.SeekResult
	if err := c.do(ctx, http.MethodPost, "/v1/subscriptions/"+url.PathEscape(name)+":seek", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
