package pubsubgrpc

import (
	"context"
	"errors"
	"strings"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/weir-dev/weir/io/pubsub"
)

// Snapshots live in the broker's one subscription snapshot store (see
// pubsub.Broker.CreateSubscriptionSnapshot): a snapshot made here is
// listed and can be sought to through weir's HTTP API and CLI, and one
// made there (or with a job snapshot's --snapshot-sources) is listed and
// can be sought to here. A snapshot records the subscription's
// acknowledgement floor and the messages acknowledged one by one above it
// (at most pubsub.MaxSnapshotAckedRuns runs of them: FAILED_PRECONDITION
// beyond); a seek keeps the subscription's per-message acknowledgement
// mode and delivers again exactly the messages the snapshot holds as
// unacknowledged, and all later ones. The lifetime is Pub/Sub's: 7 days less the age of
// the oldest unacknowledged message, bounded by the topic's retention
// (FAILED_PRECONDITION under 1 hour). The bucket earlier versions kept,
// WEIR_PUBSUB_GRPC_SNAPSHOTS, is moved into the store on its first use.

// snapshotStatus maps the broker's snapshot errors to Pub/Sub's codes.
func snapshotStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pubsub.ErrSnapshotNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, pubsub.ErrSnapshotExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, pubsub.ErrSnapshotExpiresTooSoon), errors.Is(err, pubsub.ErrSnapshotTopicMismatch), errors.Is(err, pubsub.ErrSnapshotTooLarge):
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	return statusOf(err)
}

// parseSnapshotName splits projects/{project}/snapshots/{id}; the ID
// follows the store's rule (pubsub.ValidateSnapshotName: up to 255
// characters, so a job snapshot's "<uuid>--<subscription>" is addressable).
func (s *Server) parseSnapshotName(field, name string) (project, id string, err error) {
	parts := strings.Split(name, "/")
	if len(parts) != 4 || parts[0] != "projects" || parts[2] != kindSnapshots || parts[1] == "" || parts[3] == "" {
		return "", "", invalid("%s %q: want projects/{project}/%s/{id}", field, name, kindSnapshots)
	}
	project, id = parts[1], parts[3]
	if err := s.checkProject(field, project); err != nil {
		return "", "", err
	}
	if err := pubsub.ValidateSnapshotName(id); err != nil {
		return "", "", invalid("%s %q: %v", field, name, err)
	}
	return project, id, nil
}

func snapshotProto(project string, snap pubsub.SubscriptionSnapshot) *pubsubpb.Snapshot {
	return &pubsubpb.Snapshot{Name: "projects/" + project + "/snapshots/" + snap.Name, Topic: topicName(project, snap.Topic),
		ExpireTime: timestamppb.New(snap.ExpireTime), Labels: snap.Labels}
}

// CreateSnapshot implements the Subscriber service: it records the
// subscription's acknowledgement state (see Seek).
func (s *Server) CreateSnapshot(ctx context.Context, req *pubsubpb.CreateSnapshotRequest) (*pubsubpb.Snapshot, error) {
	project, id, err := s.parseSnapshotName("name", req.GetName())
	if err != nil {
		return nil, err
	}
	sub, err := s.readable(ctx, req.GetSubscription())
	if err != nil {
		return nil, err
	}
	snap, err := s.b.CreateSubscriptionSnapshotWith(ctx, id, sub.id, pubsub.SnapshotOptions{Labels: req.GetLabels()})
	if err != nil {
		return nil, snapshotStatus(err)
	}
	s.log.Info("snapshot created", "snapshot", id, "subscription", sub.id, "ack_floor", snap.AckFloor)
	return snapshotProto(project, snap), nil
}

// GetSnapshot implements the Subscriber service.
func (s *Server) GetSnapshot(ctx context.Context, req *pubsubpb.GetSnapshotRequest) (*pubsubpb.Snapshot, error) {
	project, id, err := s.parseSnapshotName("snapshot", req.GetSnapshot())
	if err != nil {
		return nil, err
	}
	snap, err := s.b.SubscriptionSnapshot(ctx, id)
	if err != nil {
		return nil, snapshotStatus(err)
	}
	return snapshotProto(project, snap), nil
}

// ListSnapshots implements the Subscriber service.
func (s *Server) ListSnapshots(ctx context.Context, req *pubsubpb.ListSnapshotsRequest) (*pubsubpb.ListSnapshotsResponse, error) {
	project, err := s.parseProject("project", req.GetProject())
	if err != nil {
		return nil, err
	}
	snaps, err := s.b.ListSubscriptionSnapshots(ctx, "")
	if err != nil {
		return nil, snapshotStatus(err)
	}
	items, next := page(snaps, func(sn pubsub.SubscriptionSnapshot) string { return sn.Name }, req.GetPageSize(), req.GetPageToken())
	resp := &pubsubpb.ListSnapshotsResponse{NextPageToken: next}
	for _, sn := range items {
		resp.Snapshots = append(resp.Snapshots, snapshotProto(project, sn))
	}
	return resp, nil
}

// ListTopicSnapshots implements the Publisher service.
func (s *Server) ListTopicSnapshots(ctx context.Context, req *pubsubpb.ListTopicSnapshotsRequest) (*pubsubpb.ListTopicSnapshotsResponse, error) {
	project, topic, err := s.parseName("topic", req.GetTopic(), kindTopics)
	if err != nil {
		return nil, err
	}
	snaps, err := s.b.ListSubscriptionSnapshots(ctx, topic)
	if err != nil {
		return nil, snapshotStatus(err)
	}
	items, next := page(snaps, func(sn pubsub.SubscriptionSnapshot) string { return sn.Name }, req.GetPageSize(), req.GetPageToken())
	resp := &pubsubpb.ListTopicSnapshotsResponse{NextPageToken: next}
	for _, sn := range items {
		resp.Snapshots = append(resp.Snapshots, "projects/"+project+"/snapshots/"+sn.Name)
	}
	return resp, nil
}

// DeleteSnapshot implements the Subscriber service.
func (s *Server) DeleteSnapshot(ctx context.Context, req *pubsubpb.DeleteSnapshotRequest) (*emptypb.Empty, error) {
	_, id, err := s.parseSnapshotName("snapshot", req.GetSnapshot())
	if err != nil {
		return nil, err
	}
	if err := s.b.DeleteSubscriptionSnapshot(ctx, id); err != nil {
		return nil, snapshotStatus(err)
	}
	return &emptypb.Empty{}, nil
}

// seekSnapshot returns the ID of snapshot name, which sub may seek to.
func (s *Server) seekSnapshot(ctx context.Context, sub *subscription, name string) (string, error) {
	_, id, err := s.parseSnapshotName("snapshot", name)
	if err != nil {
		return "", err
	}
	snap, err := s.b.SubscriptionSnapshot(ctx, id)
	if err != nil {
		return "", snapshotStatus(err)
	}
	if snap.Topic != sub.topic {
		return "", status.Errorf(codes.FailedPrecondition, "snapshot %s is of topic %s, subscription %s reads topic %s", id, snap.Topic, sub.id, sub.topic)
	}
	return id, nil
}
