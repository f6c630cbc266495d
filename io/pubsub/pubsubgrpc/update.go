package pubsubgrpc

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/weir-dev/weir/io/pubsub"
)

// UpdateTopic, UpdateSubscription and UpdateSnapshot change the fields an
// update_mask names, as Pub/Sub does: a field not in the mask is left as
// it is, and a mask is required. Fields that map to weir's broker are
// applied to it (a topic's retention is its stream's age limit; a
// subscription's ack deadline is its consumer's ack wait); a field weir
// does not have, or that Pub/Sub does not let an update change, is
// INVALID_ARGUMENT naming it. Nothing in a mask is ignored.

// maskPaths returns the mask's paths, refusing an empty mask.
func maskPaths(what string, m *fieldmaskpb.FieldMask) ([]string, error) {
	if len(m.GetPaths()) == 0 {
		return nil, invalid("update %s: update_mask is empty: name the fields to change", what)
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range m.GetPaths() {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// UpdateTopic implements the Publisher service: message_retention_duration
// (the topic's retention) and labels may change; schemas, KMS keys,
// ingestion and message transforms are not supported, as at creation.
func (s *Server) UpdateTopic(ctx context.Context, req *pubsubpb.UpdateTopicRequest) (*pubsubpb.Topic, error) {
	t := req.GetTopic()
	project, id, err := s.parseName("topic.name", t.GetName(), kindTopics)
	if err != nil {
		return nil, err
	}
	paths, err := maskPaths("topic "+t.GetName(), req.GetUpdateMask())
	if err != nil {
		return nil, err
	}
	var retention time.Duration
	var labels map[string]string
	setLabels := false
	for _, p := range paths {
		switch p {
		case "labels":
			labels, setLabels = t.GetLabels(), true
		case "message_retention_duration":
			d := t.GetMessageRetentionDuration()
			if d == nil {
				return nil, invalid("topic %s: update_mask names message_retention_duration but the topic gives none (weir keeps messages by age: give a positive duration)", t.GetName())
			}
			if !validRetention(d) {
				return nil, invalid("topic %s: message_retention_duration %v: want a positive duration of at most 2562047h (292 years)", t.GetName(), d)
			}
			retention = d.AsDuration()
		case "name":
			return nil, invalid("topic %s: update_mask path name: a topic's name cannot change", t.GetName())
		case "schema_settings", "kms_key_name", "ingestion_data_source_settings", "message_transforms",
			"message_storage_policy", "satisfies_pzs", "state", "tags":
			return nil, invalid("topic %s: update_mask path %s: %s is not supported by weir", t.GetName(), p, p)
		default:
			return nil, invalid("topic %s: update_mask path %q is not a field of Topic that can be updated (weir: message_retention_duration, labels)", t.GetName(), p)
		}
	}
	info, err := s.b.Topic(ctx, id)
	if err != nil {
		return nil, statusOf(err)
	}
	newMeta := info.Metadata
	if setLabels {
		newMeta = withLabels(info.Metadata, labels)
	}
	if (retention > 0 && retention != info.Retention) || !maps.Equal(newMeta, info.Metadata) {
		stream, err := pubsub.TopicStream(id)
		if err != nil {
			return nil, statusOf(err)
		}
		js := s.b.JetStream()
		st, err := js.Stream(ctx, stream)
		if err != nil {
			return nil, statusOf(fmt.Errorf("updating topic %s: %w: %w", id, pubsub.ErrUnavailable, err))
		}
		cfg := st.CachedInfo().Config
		if retention > 0 {
			cfg.MaxAge = retention
		}
		cfg.Metadata = newMeta
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			return nil, statusOf(fmt.Errorf("updating topic %s: %w: %w", id, pubsub.ErrUnavailable, err))
		}
		s.log.Info("topic updated", "topic", id, "retention", retention)
		if info, err = s.b.Topic(ctx, id); err != nil {
			return nil, statusOf(err)
		}
	}
	return topicProto(project, info), nil
}

// UpdateSubscription implements the Subscriber service:
// ack_deadline_seconds (10 to 600), labels, dead_letter_policy,
// retry_policy and enable_exactly_once_delivery may change; retain_acked_messages
// may be set to true and expiration_policy to "never" (what weir does).
// enable_message_ordering cannot change (Pub/Sub fixes it at creation), and
// the retention of a subscription is its topic's.
func (s *Server) UpdateSubscription(ctx context.Context, req *pubsubpb.UpdateSubscriptionRequest) (*pubsubpb.Subscription, error) {
	u := req.GetSubscription()
	project, id, err := s.parseName("subscription.name", u.GetName(), kindSubscriptions)
	if err != nil {
		return nil, err
	}
	paths, err := maskPaths("subscription "+u.GetName(), req.GetUpdateMask())
	if err != nil {
		return nil, err
	}
	sub, err := s.readable(ctx, u.GetName())
	if err != nil {
		return nil, err
	}
	var ackWait time.Duration
	var labels map[string]string
	setLabels := false
	// The policies (dead letter, retry, exactly once) asked to change.
	policy := map[string]bool{}
	for _, p := range paths {
		switch p {
		case "ack_deadline_seconds":
			secs := u.GetAckDeadlineSeconds()
			ackWait = time.Duration(secs) * time.Second
			if secs == 0 {
				ackWait = DefaultAckDeadline
			}
			if ackWait < DefaultAckDeadline || ackWait > MaxAckDeadline {
				return nil, invalid("subscription %s: ack_deadline_seconds %d: want 10 to 600", u.GetName(), secs)
			}
		case "labels":
			labels, setLabels = u.GetLabels(), true
		case "retain_acked_messages":
			if !u.GetRetainAckedMessages() {
				return nil, invalid("subscription %s: retain_acked_messages false is not supported by weir: topics keep messages by age, acknowledged or not", u.GetName())
			}
		case "expiration_policy":
			if ttl := u.GetExpirationPolicy().GetTtl(); ttl != nil && ttl.AsDuration() != 0 {
				return nil, invalid("subscription %s: expiration_policy with a ttl is not supported by weir: subscriptions do not expire", u.GetName())
			}
		case "message_retention_duration":
			return nil, invalid("subscription %s: update_mask path message_retention_duration: a weir subscription keeps what its topic keeps; update the topic's message_retention_duration instead", u.GetName())
		case "name", "topic", "enable_message_ordering", "filter":
			return nil, invalid("subscription %s: update_mask path %s: it cannot change after creation (create a new subscription)", u.GetName(), p)
		case "dead_letter_policy", "retry_policy", "enable_exactly_once_delivery":
			policy[p] = true
		case "detached":
			return nil, invalid("subscription %s: update_mask path detached: detach a subscription with DetachSubscription", u.GetName())
		case "push_config", "bigquery_config", "cloud_storage_config", "bigtable_config", "message_transforms", "tags":
			return nil, invalid("subscription %s: update_mask path %s: %s is not supported by weir", u.GetName(), p, p)
		default:
			return nil, invalid("subscription %s: update_mask path %q is not a field of Subscription that can be updated (weir: ack_deadline_seconds, labels, retain_acked_messages, expiration_policy, dead_letter_policy, retry_policy, enable_exactly_once_delivery)", u.GetName(), p)
		}
	}
	ci, err := sub.cons.Info(ctx)
	if err != nil {
		return nil, s.fetchStatus(sub, err)
	}
	cfg := ci.Config
	changed := false
	if ackWait > 0 && ackWait != cfg.AckWait {
		cfg.AckWait, changed = ackWait, true
	}
	if setLabels {
		meta := make(map[string]string, len(cfg.Metadata)+len(labels))
		for k, v := range cfg.Metadata {
			if !strings.HasPrefix(k, metaLabel) {
				meta[k] = v
			}
		}
		for k, v := range labels {
			meta[metaLabel+k] = v
		}
		if !maps.Equal(meta, cfg.Metadata) {
			cfg.Metadata, changed = meta, true
		}
	}
	if len(policy) > 0 {
		// The policies not in the mask keep their stored values.
		cur := &pubsubpb.Subscription{}
		fillPolicies(cur, project, cfg.Metadata)
		if !policy["dead_letter_policy"] {
			u.DeadLetterPolicy = cur.GetDeadLetterPolicy()
		}
		if !policy["retry_policy"] {
			u.RetryPolicy = cur.GetRetryPolicy()
		}
		if !policy["enable_exactly_once_delivery"] {
			u.EnableExactlyOnceDelivery = cur.GetEnableExactlyOnceDelivery()
		}
		meta := maps.Clone(cfg.Metadata)
		if meta == nil {
			meta = map[string]string{}
		}
		if err := s.policyMeta(ctx, "subscription "+u.GetName(), u, meta); err != nil {
			return nil, err
		}
		if !maps.Equal(meta, cfg.Metadata) {
			cfg.Metadata, changed = meta, true
		}
	}
	if changed {
		if _, err := s.b.JetStream().UpdateConsumer(ctx, sub.stream, cfg); err != nil {
			return nil, statusOf(fmt.Errorf("updating subscription %s: %w: %w", id, pubsub.ErrUnavailable, err))
		}
		s.forget(id)
		s.log.Info("subscription updated", "subscription", id, "ack_wait", cfg.AckWait)
	}
	info, err := s.b.Subscription(ctx, id)
	if err != nil {
		return nil, statusOf(err)
	}
	return s.subscriptionProto(ctx, project, info), nil
}

// UpdateSnapshot implements the Subscriber service: labels and
// expire_time (in the future, at most 7 days after the snapshot was
// taken, as Pub/Sub bounds it) may change.
func (s *Server) UpdateSnapshot(ctx context.Context, req *pubsubpb.UpdateSnapshotRequest) (*pubsubpb.Snapshot, error) {
	u := req.GetSnapshot()
	project, id, err := s.parseSnapshotName("snapshot.name", u.GetName())
	if err != nil {
		return nil, err
	}
	paths, err := maskPaths("snapshot "+u.GetName(), req.GetUpdateMask())
	if err != nil {
		return nil, err
	}
	snap, err := s.b.UpdateSubscriptionSnapshot(ctx, id, func(snap *pubsub.SubscriptionSnapshot) error {
		for _, p := range paths {
			switch p {
			case "labels":
				snap.Labels = maps.Clone(u.GetLabels())
			case "expire_time":
				e := u.GetExpireTime()
				if e == nil || e.CheckValid() != nil {
					return invalid("snapshot %s: update_mask names expire_time but the snapshot gives no valid expire_time", u.GetName())
				}
				t := e.AsTime()
				if limit := snap.CreateTime.Add(pubsub.MaxSnapshotLifetime); !t.After(time.Now()) || t.After(limit) {
					return invalid("snapshot %s: expire_time %s: want a time in the future and at most 7 days after the snapshot was taken (%s)",
						u.GetName(), t.UTC().Format(time.RFC3339), limit.UTC().Format(time.RFC3339))
				}
				snap.ExpireTime = t.UTC()
			case "name", "topic":
				return invalid("snapshot %s: update_mask path %s: it cannot change (create a new snapshot)", u.GetName(), p)
			default:
				return invalid("snapshot %s: update_mask path %q is not a field of Snapshot that can be updated (labels, expire_time)", u.GetName(), p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, snapshotStatus(err)
	}
	return snapshotProto(project, snap), nil
}
