package pubsubgrpc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/weir-dev/weir/io/pubsub/pubsubgrpc"
)

func mask(paths ...string) *fieldmaskpb.FieldMask { return &fieldmaskpb.FieldMask{Paths: paths} }

// UpdateTopic, UpdateSubscription and UpdateSnapshot through Google's Go
// client: the fields the mask names change in the broker, the others stay;
// fields weir does not have are INVALID_ARGUMENT naming them.
func TestUpdateCalls(t *testing.T) {
	f := start(t, pubsubgrpc.Options{})
	ctx := context.Background()
	tc, sc := f.client.TopicAdminClient, f.client.SubscriptionAdminClient
	f.topic(t, "t")
	f.subscription(t, "s", "t", true, 0)

	// Topic retention.
	got, err := tc.UpdateTopic(ctx, &pubsubpb.UpdateTopicRequest{
		Topic:      &pubsubpb.Topic{Name: topicPath("t"), MessageRetentionDuration: durationpb.New(36 * time.Hour)},
		UpdateMask: mask("message_retention_duration")})
	if err != nil || got.GetMessageRetentionDuration().AsDuration() != 36*time.Hour {
		t.Fatalf("UpdateTopic: %v, %v", got, err)
	}
	if info, err := f.b.Topic(ctx, "t"); err != nil || info.Retention != 36*time.Hour {
		t.Fatalf("the broker's topic after UpdateTopic: %+v, %v", info, err)
	}
	// Topic labels: at creation, replaced as a whole by an update, and
	// the retention stays.
	if _, err := tc.CreateTopic(ctx, &pubsubpb.Topic{Name: topicPath("labelled"), Labels: map[string]string{"team": "pay", "env": "prod"}}); err != nil {
		t.Fatalf("CreateTopic with labels: %v", err)
	}
	if got, err := tc.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: topicPath("labelled")}); err != nil || got.GetLabels()["team"] != "pay" || len(got.GetLabels()) != 2 {
		t.Fatalf("GetTopic labels: %v, %v", got.GetLabels(), err)
	}
	got, err = tc.UpdateTopic(ctx, &pubsubpb.UpdateTopicRequest{Topic: &pubsubpb.Topic{Name: topicPath("t"), Labels: map[string]string{"a": "b"}}, UpdateMask: mask("labels")})
	if err != nil || len(got.GetLabels()) != 1 || got.GetLabels()["a"] != "b" || got.GetMessageRetentionDuration().AsDuration() != 36*time.Hour {
		t.Fatalf("UpdateTopic labels: %v, %v", got, err)
	}

	// Subscription ack deadline and labels; ordering stays as created.
	sub, err := sc.UpdateSubscription(ctx, &pubsubpb.UpdateSubscriptionRequest{
		Subscription: &pubsubpb.Subscription{Name: subPath("s"), AckDeadlineSeconds: 120, Labels: map[string]string{"team": "pay"},
			EnableMessageOrdering: false}, // not in the mask: unchanged
		UpdateMask: mask("ack_deadline_seconds", "labels")})
	if err != nil || sub.GetAckDeadlineSeconds() != 120 || sub.GetLabels()["team"] != "pay" || !sub.GetEnableMessageOrdering() {
		t.Fatalf("UpdateSubscription: %v, %v", sub, err)
	}
	if info, err := f.b.Subscription(ctx, "s"); err != nil || info.AckWait != 120*time.Second {
		t.Fatalf("the broker's subscription after UpdateSubscription: %+v, %v", info, err)
	}
	// Labels are replaced as a whole; the retention reported follows the topic.
	sub, err = sc.UpdateSubscription(ctx, &pubsubpb.UpdateSubscriptionRequest{
		Subscription: &pubsubpb.Subscription{Name: subPath("s"), Labels: map[string]string{"env": "dev"}},
		UpdateMask:   mask("labels")})
	if err != nil || len(sub.GetLabels()) != 1 || sub.GetLabels()["env"] != "dev" || sub.GetAckDeadlineSeconds() != 120 ||
		sub.GetMessageRetentionDuration().AsDuration() != 36*time.Hour {
		t.Fatalf("UpdateSubscription labels: %v, %v", sub, err)
	}

	// Snapshot labels and expire time.
	snapName := "projects/" + project + "/snapshots/snap"
	snap, err := sc.CreateSnapshot(ctx, &pubsubpb.CreateSnapshotRequest{Name: snapName, Subscription: subPath("s")})
	if err != nil {
		t.Fatal(err)
	}
	expire := time.Now().Add(2 * time.Hour).Truncate(time.Second).UTC()
	snap, err = sc.UpdateSnapshot(ctx, &pubsubpb.UpdateSnapshotRequest{
		Snapshot:   &pubsubpb.Snapshot{Name: snapName, Labels: map[string]string{"why": "replay"}, ExpireTime: timestamppb.New(expire)},
		UpdateMask: mask("labels", "expire_time")})
	if err != nil || snap.GetLabels()["why"] != "replay" || !snap.GetExpireTime().AsTime().Equal(expire) {
		t.Fatalf("UpdateSnapshot: %v, %v", snap, err)
	}
	if again, err := sc.GetSnapshot(ctx, &pubsubpb.GetSnapshotRequest{Snapshot: snapName}); err != nil || !again.GetExpireTime().AsTime().Equal(expire) || again.GetLabels()["why"] != "replay" {
		t.Fatalf("GetSnapshot after UpdateSnapshot: %v, %v", again, err)
	}

	refused := []struct {
		name string
		call func() error
		code codes.Code
		want string
	}{
		{"empty mask", func() error {
			_, err := tc.UpdateTopic(ctx, &pubsubpb.UpdateTopicRequest{Topic: &pubsubpb.Topic{Name: topicPath("t")}})
			return err
		}, codes.InvalidArgument, "update_mask is empty"},
		{"topic schema", func() error {
			_, err := tc.UpdateTopic(ctx, &pubsubpb.UpdateTopicRequest{Topic: &pubsubpb.Topic{Name: topicPath("t")}, UpdateMask: mask("schema_settings")})
			return err
		}, codes.InvalidArgument, "update_mask path schema_settings: schema_settings is not supported by weir"},
		{"topic unknown path", func() error {
			_, err := tc.UpdateTopic(ctx, &pubsubpb.UpdateTopicRequest{Topic: &pubsubpb.Topic{Name: topicPath("t")}, UpdateMask: mask("colour")})
			return err
		}, codes.InvalidArgument, `"colour" is not a field of Topic`},
		{"topic missing", func() error {
			_, err := tc.UpdateTopic(ctx, &pubsubpb.UpdateTopicRequest{Topic: &pubsubpb.Topic{Name: topicPath("nope"), MessageRetentionDuration: durationpb.New(time.Hour)}, UpdateMask: mask("message_retention_duration")})
			return err
		}, codes.NotFound, "nope"},
		{"topic retention of 3,000 years", func() error {
			_, err := tc.UpdateTopic(ctx, &pubsubpb.UpdateTopicRequest{Topic: &pubsubpb.Topic{Name: topicPath("t"), MessageRetentionDuration: &durationpb.Duration{Seconds: 3000 * 365 * 86400}}, UpdateMask: mask("message_retention_duration")})
			return err
		}, codes.InvalidArgument, "at most 2562047h"},
		{"topic created with a retention of 3,000 years", func() error {
			_, err := tc.CreateTopic(ctx, &pubsubpb.Topic{Name: topicPath("forever"), MessageRetentionDuration: &durationpb.Duration{Seconds: 3000 * 365 * 86400}})
			return err
		}, codes.InvalidArgument, "at most 2562047h"},
		{"ack deadline out of range", func() error {
			_, err := sc.UpdateSubscription(ctx, &pubsubpb.UpdateSubscriptionRequest{Subscription: &pubsubpb.Subscription{Name: subPath("s"), AckDeadlineSeconds: 900}, UpdateMask: mask("ack_deadline_seconds")})
			return err
		}, codes.InvalidArgument, "ack_deadline_seconds 900: want 10 to 600"},
		{"ordering", func() error {
			_, err := sc.UpdateSubscription(ctx, &pubsubpb.UpdateSubscriptionRequest{Subscription: &pubsubpb.Subscription{Name: subPath("s")}, UpdateMask: mask("enable_message_ordering")})
			return err
		}, codes.InvalidArgument, "enable_message_ordering: it cannot change after creation"},
		{"filter", func() error {
			_, err := sc.UpdateSubscription(ctx, &pubsubpb.UpdateSubscriptionRequest{Subscription: &pubsubpb.Subscription{Name: subPath("s"), Filter: "x"}, UpdateMask: mask("filter")})
			return err
		}, codes.InvalidArgument, "filter: it cannot change after creation"},
		{"subscription retention", func() error {
			_, err := sc.UpdateSubscription(ctx, &pubsubpb.UpdateSubscriptionRequest{Subscription: &pubsubpb.Subscription{Name: subPath("s"), MessageRetentionDuration: durationpb.New(time.Hour)}, UpdateMask: mask("message_retention_duration")})
			return err
		}, codes.InvalidArgument, "update the topic's message_retention_duration instead"},
		{"snapshot expire beyond 7 days", func() error {
			_, err := sc.UpdateSnapshot(ctx, &pubsubpb.UpdateSnapshotRequest{Snapshot: &pubsubpb.Snapshot{Name: snapName, ExpireTime: timestamppb.New(time.Now().Add(8 * 24 * time.Hour))}, UpdateMask: mask("expire_time")})
			return err
		}, codes.InvalidArgument, "at most 7 days after the snapshot was taken"},
		{"snapshot topic", func() error {
			_, err := sc.UpdateSnapshot(ctx, &pubsubpb.UpdateSnapshotRequest{Snapshot: &pubsubpb.Snapshot{Name: snapName, Topic: topicPath("t")}, UpdateMask: mask("topic")})
			return err
		}, codes.InvalidArgument, "update_mask path topic: it cannot change"},
	}
	for _, r := range refused {
		t.Run(r.name, func(t *testing.T) {
			err := r.call()
			if status.Code(err) != r.code || !strings.Contains(status.Convert(err).Message(), r.want) {
				t.Fatalf("err = %v, want %s with %q", err, r.code, r.want)
			}
		})
	}
	// The refusals changed nothing.
	if info, err := f.b.Subscription(ctx, "s"); err != nil || info.AckWait != 120*time.Second {
		t.Fatalf("the subscription after the refusals: %+v, %v", info, err)
	}
}
