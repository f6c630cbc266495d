package pubsubgrpc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/weir-dev/weir/io/pubsub"
)

// CreateTopic implements the Publisher service.
func (s *Server) CreateTopic(ctx context.Context, t *pubsubpb.Topic) (*pubsubpb.Topic, error) {
	project, id, err := s.parseName("name", t.GetName(), kindTopics)
	if err != nil {
		return nil, err
	}
	switch {
	case t.GetSchemaSettings() != nil:
		return nil, invalid("topic %s: schema_settings are not supported by weir", t.GetName())
	case t.GetKmsKeyName() != "":
		return nil, invalid("topic %s: kms_key_name is not supported by weir", t.GetName())
	case t.GetIngestionDataSourceSettings() != nil:
		return nil, invalid("topic %s: ingestion_data_source_settings are not supported by weir", t.GetName())
	case len(t.GetMessageTransforms()) > 0:
		return nil, invalid("topic %s: message_transforms are not supported by weir", t.GetName())
	}
	var cfg pubsub.TopicConfig
	if d := t.GetMessageRetentionDuration(); d != nil {
		if !validRetention(d) {
			return nil, invalid("topic %s: message_retention_duration %v: want a positive duration of at most 2562047h (292 years)", t.GetName(), d)
		}
		cfg.Retention = d.AsDuration()
	}
	if len(t.GetLabels()) > 0 {
		cfg.Metadata = map[string]string{}
		for k, v := range t.GetLabels() {
			cfg.Metadata[metaLabel+k] = v
		}
	}
	s.creatingTopic.Lock()
	defer s.creatingTopic.Unlock()
	if s.opts.MaxTopics > 0 {
		all, err := s.b.ListTopics(ctx)
		if err != nil {
			return nil, statusOf(err)
		}
		n := 0
		for _, t := range all {
			if !strings.HasPrefix(t.Name, pubsub.DeadLetterTopic("")) {
				n++
			}
		}
		if n >= s.opts.MaxTopics {
			return nil, status.Errorf(codes.ResourceExhausted, "the server already has %d topics, its limit (--max-topics %d): delete one first, or restart the server with a higher --max-topics", n, s.opts.MaxTopics)
		}
	}
	info, err := s.b.CreateTopic(ctx, id, cfg)
	if err != nil {
		return nil, statusOf(err)
	}
	return topicProto(project, info), nil
}

func topicProto(project string, info pubsub.TopicInfo) *pubsubpb.Topic {
	return &pubsubpb.Topic{
		Name:                     topicName(project, info.Name),
		MessageRetentionDuration: durationpb.New(info.Retention),
		State:                    pubsubpb.Topic_ACTIVE,
		Labels:                   labelsOf(info.Metadata),
	}
}

// labelsOf returns the labels stored in metadata (metaLabel keys), or nil.
func labelsOf(meta map[string]string) map[string]string {
	var out map[string]string
	for k, v := range meta {
		if l, ok := strings.CutPrefix(k, metaLabel); ok {
			if out == nil {
				out = map[string]string{}
			}
			out[l] = v
		}
	}
	return out
}

// withLabels returns meta with its labels replaced by labels.
func withLabels(meta, labels map[string]string) map[string]string {
	out := make(map[string]string, len(meta)+len(labels))
	for k, v := range meta {
		if !strings.HasPrefix(k, metaLabel) {
			out[k] = v
		}
	}
	for k, v := range labels {
		out[metaLabel+k] = v
	}
	return out
}

// GetTopic implements the Publisher service.
func (s *Server) GetTopic(ctx context.Context, req *pubsubpb.GetTopicRequest) (*pubsubpb.Topic, error) {
	project, id, err := s.parseName("topic", req.GetTopic(), kindTopics)
	if err != nil {
		return nil, err
	}
	info, err := s.b.Topic(ctx, id)
	if err != nil {
		return nil, statusOf(err)
	}
	return topicProto(project, info), nil
}

// ListTopics implements the Publisher service: every topic (weir has one
// namespace for all projects), by name.
func (s *Server) ListTopics(ctx context.Context, req *pubsubpb.ListTopicsRequest) (*pubsubpb.ListTopicsResponse, error) {
	project, err := s.parseProject("project", req.GetProject())
	if err != nil {
		return nil, err
	}
	all, err := s.b.ListTopics(ctx)
	if err != nil {
		return nil, statusOf(err)
	}
	items, next := page(all, func(t pubsub.TopicInfo) string { return t.Name }, req.GetPageSize(), req.GetPageToken())
	resp := &pubsubpb.ListTopicsResponse{NextPageToken: next}
	for _, t := range items {
		resp.Topics = append(resp.Topics, topicProto(project, t))
	}
	return resp, nil
}

// ListTopicSubscriptions implements the Publisher service.
func (s *Server) ListTopicSubscriptions(ctx context.Context, req *pubsubpb.ListTopicSubscriptionsRequest) (*pubsubpb.ListTopicSubscriptionsResponse, error) {
	project, id, err := s.parseName("topic", req.GetTopic(), kindTopics)
	if err != nil {
		return nil, err
	}
	subs, err := s.b.ListSubscriptions(ctx, id)
	if err != nil {
		return nil, statusOf(err)
	}
	items, next := page(subs, func(i pubsub.SubscriptionInfo) string { return i.Name }, req.GetPageSize(), req.GetPageToken())
	resp := &pubsubpb.ListTopicSubscriptionsResponse{NextPageToken: next}
	for _, i := range items {
		resp.Subscriptions = append(resp.Subscriptions, subName(project, i.Name))
	}
	return resp, nil
}

// DeleteTopic implements the Publisher service. Unlike Pub/Sub, which
// detaches a deleted topic's subscriptions, weir deletes them with it.
func (s *Server) DeleteTopic(ctx context.Context, req *pubsubpb.DeleteTopicRequest) (*emptypb.Empty, error) {
	_, id, err := s.parseName("topic", req.GetTopic(), kindTopics)
	if err != nil {
		return nil, err
	}
	if err := s.b.DeleteTopic(ctx, id); err != nil {
		return nil, statusOf(err)
	}
	s.forgetTopic(id)
	return &emptypb.Empty{}, nil
}

// Publish implements the Publisher service. The messages of one request
// are stored in their order, as one asynchronous batch; message_ids are
// their stream sequences.
func (s *Server) Publish(ctx context.Context, req *pubsubpb.PublishRequest) (*pubsubpb.PublishResponse, error) {
	_, id, err := s.parseName("topic", req.GetTopic(), kindTopics)
	if err != nil {
		return nil, err
	}
	if len(req.GetMessages()) == 0 {
		return nil, invalid("publish to %s: no messages", req.GetTopic())
	}
	if n := len(req.GetMessages()); n > MaxPublishMessages {
		return nil, invalid("publish to %s: %d messages in one request, more than the %d Pub/Sub allows: publish them in several", req.GetTopic(), n, MaxPublishMessages)
	}
	if n := publishBytes(req.GetMessages()); n > MaxPublishBytes {
		return nil, invalid("publish to %s: the request's messages hold %d bytes, more than the %d Pub/Sub allows in one request: publish them in several", req.GetTopic(), n, MaxPublishBytes)
	}
	subject, err := pubsub.TopicSubject(id)
	if err != nil {
		return nil, invalid("%v", err)
	}
	msgs := make([]*nats.Msg, len(req.GetMessages()))
	for i, m := range req.GetMessages() {
		if msgs[i], err = natsMsg(subject, m); err != nil {
			return nil, invalid("publish to %s: message %d: %v", req.GetTopic(), i, err)
		}
	}
	js := s.b.JetStream()
	futures := make([]jetstream.PubAckFuture, len(msgs))
	for i, m := range msgs {
		if futures[i], err = js.PublishMsgAsync(m); err != nil {
			return nil, publishStatus(req.GetTopic(), err)
		}
	}
	resp := &pubsubpb.PublishResponse{MessageIds: make([]string, len(futures))}
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			resp.MessageIds[i] = strconv.FormatUint(ack.Sequence, 10)
		case err := <-f.Err():
			return nil, publishStatus(req.GetTopic(), err)
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	return resp, nil
}

func publishStatus(topic string, err error) error {
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		return status.Errorf(codes.NotFound, "topic %s does not exist: create it first", topic)
	}
	return statusOf(fmt.Errorf("publishing to %s: %w: %w", topic, pubsub.ErrUnavailable, err))
}

// natsMsg checks a message as Pub/Sub does (data or attributes, attribute
// names not starting with goog) and as NATS headers need (no control
// characters, no ':' or spaces in names), and builds it.
func natsMsg(subject string, m *pubsubpb.PubsubMessage) (*nats.Msg, error) {
	if len(m.GetData()) == 0 && len(m.GetAttributes()) == 0 {
		return nil, errors.New("a message needs data or at least one attribute")
	}
	if len(m.GetData()) > maxMessageBytes {
		return nil, fmt.Errorf("data of %d bytes: the broker takes at most %d", len(m.GetData()), maxMessageBytes)
	}
	if n := len(m.GetAttributes()); n > MaxAttributes {
		return nil, fmt.Errorf("%d attributes, more than the %d Pub/Sub allows", n, MaxAttributes)
	}
	msg := nats.NewMsg(subject)
	msg.Data = m.GetData()
	for k, v := range m.GetAttributes() {
		if err := checkAttribute(k, v); err != nil {
			return nil, err
		}
		msg.Header[k] = []string{v}
	}
	if k := m.GetOrderingKey(); k != "" {
		if len(k) > 1024 || !printable(k) {
			return nil, fmt.Errorf("ordering key %.40q: want at most 1024 printable characters", k)
		}
		msg.Header[OrderingKeyAttribute] = []string{k}
	}
	return msg, nil
}

// publishBytes is the bytes of msgs' data, attributes and ordering keys.
func publishBytes(msgs []*pubsubpb.PubsubMessage) int {
	n := 0
	for _, m := range msgs {
		n += len(m.GetData()) + len(m.GetOrderingKey())
		for k, v := range m.GetAttributes() {
			n += len(k) + len(v)
		}
	}
	return n
}

func checkAttribute(k, v string) error {
	switch {
	case k == "":
		return errors.New("an attribute name is empty")
	case len(k) > 256:
		return fmt.Errorf("attribute name %.40q...: longer than 256 bytes", k)
	case len(v) > 1024:
		return fmt.Errorf("attribute %q: a value longer than 1024 bytes", k)
	case strings.HasPrefix(strings.ToLower(k), "goog"):
		return fmt.Errorf("attribute %q: names starting with goog are reserved", k)
	case len(k) >= 5 && strings.EqualFold(k[:5], "nats-"):
		return fmt.Errorf("attribute %q: names starting with Nats- are reserved by the broker", k)
	case strings.ContainsAny(k, ": \t"):
		return fmt.Errorf("attribute %q: ':' and spaces are not allowed in a name (the broker stores attributes as headers)", k)
	case !printable(k) || !printable(v) || !utf8.ValidString(v):
		return fmt.Errorf("attribute %q: control characters and invalid UTF-8 are not allowed (the broker stores attributes as headers)", k)
	}
	return nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] == 0x7f {
			return false
		}
	}
	return true
}

// validRetention says whether d is a topic's retention weir can keep: a
// valid, positive duration that fits a time.Duration (a longer one would
// be stored as 292 years without a word).
func validRetention(d *durationpb.Duration) bool {
	return d.CheckValid() == nil && d.AsDuration() > 0 && d.GetSeconds() < int64(math.MaxInt64/time.Second)
}
