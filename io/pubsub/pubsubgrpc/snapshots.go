package pubsubgrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/weir-dev/weir/io/pubsub"
)

// snapshotBucket is the JetStream key-value bucket of this API's
// subscription snapshots, one key per snapshot ID.
const snapshotBucket = "WEIR_PUBSUB_GRPC_SNAPSHOTS"

// snapshotLifetime is how long a snapshot lives, as in Pub/Sub (at most 7
// days).
const snapshotLifetime = 7 * 24 * time.Hour

// snapshot is a stored snapshot: the subscription's acknowledgement floor
// (every message up to AckFloor is acknowledged) when it was taken.
type snapshot struct {
	Topic        string            `json:"topic"`
	Subscription string            `json:"subscription"`
	AckFloor     uint64            `json:"ack_floor"`
	Created      time.Time         `json:"created"`
	Expire       time.Time         `json:"expire"`
	Labels       map[string]string `json:"labels,omitempty"`
}

func (s *Server) snapshots(ctx context.Context) (jetstream.KeyValue, error) {
	js := s.b.JetStream()
	kv, err := js.KeyValue(ctx, snapshotBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: snapshotBucket,
			Description: "snapshots of the Pub/Sub gRPC API's subscriptions", Storage: jetstream.FileStorage})
	}
	if err != nil {
		return nil, statusOf(fmt.Errorf("opening the snapshot store: %w: %w", pubsub.ErrUnavailable, err))
	}
	return kv, nil
}

// loadSnapshot reads snapshot id; NOT_FOUND when missing or expired.
func (s *Server) loadSnapshot(ctx context.Context, kv jetstream.KeyValue, id string) (snapshot, error) {
	var snap snapshot
	e, err := kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return snap, status.Errorf(codes.NotFound, "snapshot %s does not exist", id)
	}
	if err != nil {
		return snap, statusOf(fmt.Errorf("reading snapshot %s: %w: %w", id, pubsub.ErrUnavailable, err))
	}
	if err := json.Unmarshal(e.Value(), &snap); err != nil {
		return snap, status.Errorf(codes.Internal, "snapshot %s is unreadable: %v", id, err)
	}
	if time.Now().After(snap.Expire) {
		return snap, status.Errorf(codes.NotFound, "snapshot %s expired at %s", id, snap.Expire.Format(time.RFC3339))
	}
	return snap, nil
}

func snapshotProto(project, id string, snap snapshot) *pubsubpb.Snapshot {
	return &pubsubpb.Snapshot{Name: "projects/" + project + "/snapshots/" + id, Topic: topicName(project, snap.Topic),
		ExpireTime: timestamppb.New(snap.Expire), Labels: snap.Labels}
}

// CreateSnapshot implements the Subscriber service: it records the
// subscription's acknowledgement floor (see Seek).
func (s *Server) CreateSnapshot(ctx context.Context, req *pubsubpb.CreateSnapshotRequest) (*pubsubpb.Snapshot, error) {
	project, id, err := s.parseName("name", req.GetName(), kindSnapshots)
	if err != nil {
		return nil, err
	}
	sub, err := s.readable(ctx, req.GetSubscription())
	if err != nil {
		return nil, err
	}
	ci, err := sub.cons.Info(ctx)
	if err != nil {
		return nil, s.fetchStatus(sub, err)
	}
	now := time.Now().UTC()
	snap := snapshot{Topic: sub.topic, Subscription: sub.id, AckFloor: ci.AckFloor.Stream, Created: now,
		Expire: now.Add(snapshotLifetime), Labels: req.GetLabels()}
	kv, err := s.snapshots(ctx)
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(snap)
	if _, err := kv.Create(ctx, id, b); errors.Is(err, jetstream.ErrKeyExists) {
		if _, lerr := s.loadSnapshot(ctx, kv, id); status.Code(lerr) != codes.NotFound {
			return nil, status.Errorf(codes.AlreadyExists, "snapshot %s already exists", id)
		}
		if _, err := kv.Put(ctx, id, b); err != nil { // replaces an expired one
			return nil, statusOf(fmt.Errorf("storing snapshot %s: %w: %w", id, pubsub.ErrUnavailable, err))
		}
	} else if err != nil {
		return nil, statusOf(fmt.Errorf("storing snapshot %s: %w: %w", id, pubsub.ErrUnavailable, err))
	}
	s.log.Info("snapshot created", "snapshot", id, "subscription", sub.id, "ack_floor", snap.AckFloor)
	return snapshotProto(project, id, snap), nil
}

// GetSnapshot implements the Subscriber service.
func (s *Server) GetSnapshot(ctx context.Context, req *pubsubpb.GetSnapshotRequest) (*pubsubpb.Snapshot, error) {
	project, id, err := s.parseName("snapshot", req.GetSnapshot(), kindSnapshots)
	if err != nil {
		return nil, err
	}
	kv, err := s.snapshots(ctx)
	if err != nil {
		return nil, err
	}
	snap, err := s.loadSnapshot(ctx, kv, id)
	if err != nil {
		return nil, err
	}
	return snapshotProto(project, id, snap), nil
}

// allSnapshots lists the live snapshots, by ID.
func (s *Server) allSnapshots(ctx context.Context) ([]string, map[string]snapshot, error) {
	kv, err := s.snapshots(ctx)
	if err != nil {
		return nil, nil, err
	}
	keys, err := kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, statusOf(fmt.Errorf("listing snapshots: %w: %w", pubsub.ErrUnavailable, err))
	}
	sort.Strings(keys)
	out := map[string]snapshot{}
	var ids []string
	for _, k := range keys {
		snap, err := s.loadSnapshot(ctx, kv, k)
		if status.Code(err) == codes.NotFound {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		ids = append(ids, k)
		out[k] = snap
	}
	return ids, out, nil
}

// ListSnapshots implements the Subscriber service.
func (s *Server) ListSnapshots(ctx context.Context, req *pubsubpb.ListSnapshotsRequest) (*pubsubpb.ListSnapshotsResponse, error) {
	project, err := s.parseProject("project", req.GetProject())
	if err != nil {
		return nil, err
	}
	ids, snaps, err := s.allSnapshots(ctx)
	if err != nil {
		return nil, err
	}
	items, next := page(ids, func(id string) string { return id }, req.GetPageSize(), req.GetPageToken())
	resp := &pubsubpb.ListSnapshotsResponse{NextPageToken: next}
	for _, id := range items {
		resp.Snapshots = append(resp.Snapshots, snapshotProto(project, id, snaps[id]))
	}
	return resp, nil
}

// ListTopicSnapshots implements the Publisher service.
func (s *Server) ListTopicSnapshots(ctx context.Context, req *pubsubpb.ListTopicSnapshotsRequest) (*pubsubpb.ListTopicSnapshotsResponse, error) {
	project, topic, err := s.parseName("topic", req.GetTopic(), kindTopics)
	if err != nil {
		return nil, err
	}
	if _, err := s.b.Topic(ctx, topic); err != nil {
		return nil, statusOf(err)
	}
	ids, snaps, err := s.allSnapshots(ctx)
	if err != nil {
		return nil, err
	}
	var mine []string
	for _, id := range ids {
		if snaps[id].Topic == topic {
			mine = append(mine, id)
		}
	}
	items, next := page(mine, func(id string) string { return id }, req.GetPageSize(), req.GetPageToken())
	resp := &pubsubpb.ListTopicSnapshotsResponse{NextPageToken: next}
	for _, id := range items {
		resp.Snapshots = append(resp.Snapshots, "projects/"+project+"/snapshots/"+id)
	}
	return resp, nil
}

// DeleteSnapshot implements the Subscriber service.
func (s *Server) DeleteSnapshot(ctx context.Context, req *pubsubpb.DeleteSnapshotRequest) (*emptypb.Empty, error) {
	_, id, err := s.parseName("snapshot", req.GetSnapshot(), kindSnapshots)
	if err != nil {
		return nil, err
	}
	kv, err := s.snapshots(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := s.loadSnapshot(ctx, kv, id); err != nil {
		return nil, err
	}
	if err := kv.Purge(ctx, id); err != nil {
		return nil, statusOf(fmt.Errorf("deleting snapshot %s: %w: %w", id, pubsub.ErrUnavailable, err))
	}
	return &emptypb.Empty{}, nil
}

// seekSnapshot returns the sequence a seek to snapshot name starts sub at.
func (s *Server) seekSnapshot(ctx context.Context, sub *subscription, name string) (uint64, error) {
	_, id, err := s.parseName("snapshot", name, kindSnapshots)
	if err != nil {
		return 0, err
	}
	kv, err := s.snapshots(ctx)
	if err != nil {
		return 0, err
	}
	snap, err := s.loadSnapshot(ctx, kv, id)
	if err != nil {
		return 0, err
	}
	if snap.Topic != sub.topic {
		return 0, status.Errorf(codes.FailedPrecondition, "snapshot %s is of topic %s, subscription %s reads topic %s", id, snap.Topic, sub.id, sub.topic)
	}
	return snap.AckFloor + 1, nil
}
