package api

import (
	"context"
	"errors"
	"net/http"
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

func (s *Server) registerSubscriptionSnapshots() {
	s.handleFunc("POST /v1/subscription-snapshots", s.withSnapshots(s.createSubscriptionSnapshot))
	s.handleFunc("GET /v1/subscription-snapshots", s.withSnapshots(s.listSubscriptionSnapshots))
	s.handleFunc("GET /v1/subscription-snapshots/{name}", s.withSnapshots(s.getSubscriptionSnapshot))
	s.handleFunc("DELETE /v1/subscription-snapshots/{name}", s.withSnapshots(s.deleteSubscriptionSnapshot))
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
	writeJSON(w, http.StatusCreated, wireSubscriptionSnapshot(snap))
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
	writeJSON(w, http.StatusOK, SubscriptionSnapshotList{Snapshots: wireSlice(list, wireSubscriptionSnapshot)})
}

func (s *Server) getSubscriptionSnapshot(w http.ResponseWriter, r *http.Request) {
	ss, _ := s.snapshotter()
	snap, err := ss.SubscriptionSnapshot(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeError(w, snapshotError(err))
		return
	}
	writeJSON(w, http.StatusOK, wireSubscriptionSnapshot(snap))
}

func (s *Server) deleteSubscriptionSnapshot(w http.ResponseWriter, r *http.Request) {
	ss, _ := s.snapshotter()
	if err := ss.DeleteSubscriptionSnapshot(r.Context(), r.PathValue("name")); err != nil {
		s.writeError(w, snapshotError(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// seekSubscription serves POST /v1/subscriptions/{name}:seek.
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
	writeJSON(w, http.StatusOK, wireSeekResult(res))
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
