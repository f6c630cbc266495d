package pubsubgrpc

// This file holds the subscription policies of Pub/Sub that weir applies
// as messages are delivered: the dead-letter policy (a message delivered
// max_delivery_attempts times goes to the dead-letter topic instead of a
// further attempt; deliveries carry delivery_attempt), the retry policy
// (a nacked message comes again after an exponential backoff between
// minimum_backoff and maximum_backoff), filters (a message that does not
// match is acknowledged without delivery), exactly-once delivery (the
// acknowledgement results) and detached subscriptions.

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/weir-dev/weir/io/pubsub"
)

// Metadata keys of the subscription policies.
const (
	metaDeadLetter  = "pubsub.dead_letter_topic"
	metaMaxAttempts = "pubsub.max_delivery_attempts"
	metaMinBackoff  = "pubsub.retry_minimum_backoff"
	metaMaxBackoff  = "pubsub.retry_maximum_backoff"
	metaFilter      = "pubsub.filter"
	metaExactlyOnce = "pubsub.enable_exactly_once_delivery"
	metaDetached    = "pubsub.detached"
)

// Pub/Sub's bounds and defaults of the policies.
const (
	DefaultMaxDeliveryAttempts = 5
	minDeliveryAttempts        = 5
	maxDeliveryAttempts        = 100
	defaultMinBackoff          = 10 * time.Second
	defaultMaxBackoff          = 600 * time.Second
	maxBackoff                 = 600 * time.Second
)

// Attributes a dead-lettered message carries, as Pub/Sub sets them.
const (
	attrDLDeliveryCount   = "CloudPubSubDeadLetterSourceDeliveryCount"
	attrDLSubscription    = "CloudPubSubDeadLetterSourceSubscription"
	attrDLProject         = "CloudPubSubDeadLetterSourceSubscriptionProject"
	attrDLTopicPublishTim = "CloudPubSubDeadLetterSourceTopicPublishTime"
)

// policies are a subscription's delivery policies.
type policies struct {
	// deadLetter is the dead-letter topic ("" none), after maxAttempts
	// deliveries.
	deadLetter  string
	maxAttempts int
	// retry is set with a retry policy: a nack redelivers after
	// minBackoff·2^(attempts-1), at most maxBackoff.
	retry                  bool
	minBackoff, maxBackoff time.Duration
	filter                 filter
	exactlyOnce            bool
	detached               bool
}

// policiesOf reads the policies stored in a subscription's metadata.
func policiesOf(meta map[string]string) policies {
	var p policies
	if t := meta[metaDeadLetter]; t != "" {
		p.deadLetter = t
		p.maxAttempts, _ = strconv.Atoi(meta[metaMaxAttempts])
		if p.maxAttempts <= 0 {
			p.maxAttempts = DefaultMaxDeliveryAttempts
		}
	}
	if v, ok := meta[metaMinBackoff]; ok {
		p.retry = true
		p.minBackoff, _ = time.ParseDuration(v)
		p.maxBackoff, _ = time.ParseDuration(meta[metaMaxBackoff])
	}
	p.filter, _ = parseFilter(meta[metaFilter]) // validated when stored
	p.exactlyOnce = meta[metaExactlyOnce] == "true"
	p.detached = meta[metaDetached] == "true"
	return p
}

// policyMeta checks the policies of a Subscription request and adds them
// to the metadata meta; field names the request (for errors).
func (s *Server) policyMeta(ctx context.Context, field string, req *pubsubpb.Subscription, meta map[string]string) error {
	if dlp := req.GetDeadLetterPolicy(); dlp != nil && dlp.GetDeadLetterTopic() != "" {
		_, topic, err := s.parseName("dead_letter_policy.dead_letter_topic", dlp.GetDeadLetterTopic(), kindTopics)
		if err != nil {
			return err
		}
		if _, err := s.b.Topic(ctx, topic); err != nil {
			return status.Errorf(codes.NotFound, "%s: dead_letter_policy.dead_letter_topic %s does not exist: create it first", field, dlp.GetDeadLetterTopic())
		}
		n := int(dlp.GetMaxDeliveryAttempts())
		if n == 0 {
			n = DefaultMaxDeliveryAttempts
		}
		if n < minDeliveryAttempts || n > maxDeliveryAttempts {
			return invalid("%s: dead_letter_policy.max_delivery_attempts %d: want %d to %d", field, n, minDeliveryAttempts, maxDeliveryAttempts)
		}
		meta[metaDeadLetter], meta[metaMaxAttempts] = topic, strconv.Itoa(n)
	} else {
		delete(meta, metaDeadLetter)
		delete(meta, metaMaxAttempts)
	}
	if rp := req.GetRetryPolicy(); rp != nil {
		lo, hi := defaultMinBackoff, defaultMaxBackoff
		if d := rp.GetMinimumBackoff(); d != nil {
			lo = d.AsDuration()
		}
		if d := rp.GetMaximumBackoff(); d != nil {
			hi = d.AsDuration()
		}
		if lo < 0 || lo > maxBackoff || hi < 0 || hi > maxBackoff || lo > hi {
			return invalid("%s: retry_policy minimum_backoff %s and maximum_backoff %s: want 0 to 600s, the minimum at most the maximum", field, lo, hi)
		}
		meta[metaMinBackoff], meta[metaMaxBackoff] = lo.String(), hi.String()
	} else {
		delete(meta, metaMinBackoff)
		delete(meta, metaMaxBackoff)
	}
	meta[metaExactlyOnce] = strconv.FormatBool(req.GetEnableExactlyOnceDelivery())
	return nil
}

// fillPolicies sets the policies stored in meta on the subscription p.
func fillPolicies(p *pubsubpb.Subscription, project string, meta map[string]string) {
	pol := policiesOf(meta)
	if pol.deadLetter != "" {
		p.DeadLetterPolicy = &pubsubpb.DeadLetterPolicy{DeadLetterTopic: topicName(project, pol.deadLetter), MaxDeliveryAttempts: int32(pol.maxAttempts)}
	}
	if pol.retry {
		p.RetryPolicy = &pubsubpb.RetryPolicy{MinimumBackoff: durationpb.New(pol.minBackoff), MaximumBackoff: durationpb.New(pol.maxBackoff)}
	}
	p.Filter = meta[metaFilter]
	p.EnableExactlyOnceDelivery = pol.exactlyOnce
	p.Detached = pol.detached
}

// backoff is the delay before a nacked delivery comes again under the
// retry policy, after attempts deliveries.
func (p policies) backoff(attempts uint64) time.Duration {
	d := p.minBackoff
	for i := uint64(1); i < attempts && d < p.maxBackoff; i++ {
		d *= 2
		if d <= 0 {
			break
		}
	}
	return min(max(d, p.minBackoff), p.maxBackoff)
}

// ackDelivered is the delivery count in an ack ID ($JS.ACK.<stream>.
// <consumer>.<delivered>.…, with a domain and account two tokens later); 0
// when it has none.
func ackDelivered(id string) uint64 {
	rest, ok := strings.CutPrefix(id, "$JS.ACK.")
	if !ok {
		return 0
	}
	tok := strings.Split(rest, ".")
	i := 2
	if len(tok) >= 10 {
		i = 4
	}
	if len(tok) <= i {
		return 0
	}
	n, _ := strconv.ParseUint(tok[i], 10, 64)
	return n
}

// screen applies the subscription's filter and dead-letter policy to
// delivery m (rm, its converted message): it reports false when the
// message must not go to the client — it does not match the filter (it
// is acknowledged), or it was delivered max_delivery_attempts times
// already (it is published to the dead-letter topic, then acknowledged).
// With a dead-letter policy it sets rm's delivery_attempt.
func (s *Server) screen(ctx context.Context, sub *subscription, m jetstream.Msg, rm *pubsubpb.ReceivedMessage, attempts uint64) (bool, error) {
	if sub.pol.filter != nil && !sub.pol.filter.match(rm.GetMessage().GetAttributes()) {
		return false, s.autoAck(ctx, sub, rm.GetAckId())
	}
	if sub.pol.deadLetter == "" {
		return true, nil
	}
	if attempts <= uint64(sub.pol.maxAttempts) {
		rm.DeliveryAttempt = int32(attempts)
		return true, nil
	}
	if !s.deadLetter(ctx, sub, rm.GetMessage(), attempts-1) {
		_ = m.NakWithDelay(time.Second)
		return false, nil
	}
	return false, s.autoAck(ctx, sub, rm.GetAckId())
}

// deadLetter publishes message pm of sub, delivered attempts times, to the
// subscription's dead-letter topic with Pub/Sub's attributes, and reports
// whether it is stored there (a failure is logged; the caller retries).
func (s *Server) deadLetter(ctx context.Context, sub *subscription, pm *pubsubpb.PubsubMessage, attempts uint64) bool {
	attrs := make(map[string]string, len(pm.GetAttributes())+5)
	for k, v := range pm.GetAttributes() {
		attrs[k] = v
	}
	if k := pm.GetOrderingKey(); k != "" {
		attrs[OrderingKeyAttribute] = k
	}
	attrs[attrDLDeliveryCount] = strconv.FormatUint(attempts, 10)
	attrs[attrDLSubscription] = sub.id
	attrs[attrDLProject] = s.projectOrDefault()
	attrs[attrDLTopicPublishTim] = pm.GetPublishTime().AsTime().UTC().Format(time.RFC3339Nano)
	// The ID makes a second forward of the same message (a crash between
	// the publish and the acknowledgement) a duplicate the topic drops.
	id := "deadletter-" + sub.id + "-" + pm.GetMessageId()
	if _, err := s.b.Publish(ctx, sub.pol.deadLetter, pm.GetData(), attrs, id); err != nil {
		s.log.Warn("could not forward a message to its subscription's dead-letter topic: it is retried", "subscription", sub.id,
			"dead_letter_topic", sub.pol.deadLetter, "message_id", pm.GetMessageId(), "error", err)
		return false
	}
	s.log.Debug("message forwarded to the dead-letter topic", "subscription", sub.id, "dead_letter_topic", sub.pol.deadLetter,
		"message_id", pm.GetMessageId(), "delivery_attempts", attempts)
	return true
}

// deadLetterNacked forwards, at once, the deliveries of ids that a nack
// gives back after their last attempt (max_delivery_attempts) to the
// dead-letter topic and acknowledges them, as Pub/Sub does without waiting
// for another pull; it returns the others, to be nacked as usual. One it
// cannot forward is nacked too: its next delivery forwards it (screen).
func (s *Server) deadLetterNacked(ctx context.Context, sub *subscription, ids []string) []string {
	if sub.pol.deadLetter == "" {
		return ids
	}
	rest := ids[:0:0]
	for _, id := range ids {
		n := ackDelivered(id)
		if n < uint64(sub.pol.maxAttempts) {
			rest = append(rest, id)
			continue
		}
		st, err := s.b.JetStream().Stream(ctx, sub.stream)
		var raw *jetstream.RawStreamMsg
		if err == nil {
			raw, err = st.GetMsg(ctx, ackSeq(id))
		}
		if err != nil {
			rest = append(rest, id)
			continue
		}
		pm := &pubsubpb.PubsubMessage{Data: raw.Data, MessageId: strconv.FormatUint(raw.Sequence, 10), PublishTime: timestamppb.New(raw.Time)}
		for k, v := range raw.Header {
			if len(v) == 0 || len(k) >= 5 && strings.EqualFold(k[:5], "nats-") {
				continue
			}
			if pm.Attributes == nil {
				pm.Attributes = map[string]string{}
			}
			pm.Attributes[k] = v[0]
		}
		if !s.deadLetter(ctx, sub, pm, n) || s.autoAck(ctx, sub, id) != nil {
			rest = append(rest, id)
		}
	}
	return rest
}

// autoAck acknowledges a delivery the client never sees (filtered out, or
// dead-lettered), with the same record as a client's acknowledgement.
// The acknowledgement outlives the request that fetched the delivery: a
// client that closes its stream while a filtered-out message is being
// screened would otherwise leave that message pending, and counted in the
// backlog, until its ack deadline and a later pull.
func (s *Server) autoAck(ctx context.Context, sub *subscription, id string) error {
	// A streaming pull's context has no deadline, which the flush of the
	// acknowledgement needs.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), autoAckTimeout)
	defer cancel()
	done, err := s.ack(ctx, sub, []string{id})
	if err != nil {
		return err
	}
	if sub.ordered {
		s.ordering(sub.id).acked(done)
	}
	return nil
}

// autoAckTimeout bounds an acknowledgement the server makes itself.
const autoAckTimeout = 10 * time.Second

// projectOrDefault is the project the server names in what it writes.
func (s *Server) projectOrDefault() string {
	if s.opts.Project != "" {
		return s.opts.Project
	}
	return "weir"
}

// checkDetached refuses pulls from a detached subscription.
func checkDetached(sub *subscription) error {
	if sub.pol.detached {
		return status.Errorf(codes.FailedPrecondition, "subscription %s is detached from its topic: it receives nothing", sub.id)
	}
	return nil
}

// DetachSubscription implements the Publisher service: the subscription
// stays, but receives nothing more; its pulls and acknowledgements are
// FAILED_PRECONDITION, and GetSubscription reports detached. A weir job's
// subscription cannot be detached.
func (s *Server) DetachSubscription(ctx context.Context, req *pubsubpb.DetachSubscriptionRequest) (*pubsubpb.DetachSubscriptionResponse, error) {
	_, id, err := s.parseName("subscription", req.GetSubscription(), kindSubscriptions)
	if err != nil {
		return nil, err
	}
	sub, err := s.readable(ctx, req.GetSubscription())
	if err != nil {
		if status.Code(err) == codes.FailedPrecondition && sub == nil {
			if cur, lerr := s.lookup(ctx, id); lerr == nil && cur.pol.detached {
				return &pubsubpb.DetachSubscriptionResponse{}, nil // already detached
			}
		}
		return nil, err
	}
	ci, err := sub.cons.Info(ctx)
	if err != nil {
		return nil, s.fetchStatus(sub, err)
	}
	cfg := ci.Config
	meta := maps.Clone(cfg.Metadata)
	if meta == nil {
		meta = map[string]string{}
	}
	meta[metaDetached] = "true"
	cfg.Metadata = meta
	if _, err := s.b.JetStream().UpdateConsumer(ctx, sub.stream, cfg); err != nil {
		return nil, statusOf(fmt.Errorf("detaching subscription %s: %w: %w", id, pubsub.ErrUnavailable, err))
	}
	s.forget(id)
	s.forgetOrdering(id)
	s.log.Info("subscription detached", "subscription", id, "topic", sub.topic)
	return &pubsubpb.DetachSubscriptionResponse{}, nil
}

// invalidAckIDs returns, for an exactly-once subscription, the error that
// tells Google's clients which of ids are no longer valid (deliveries of a
// generation before the subscription's last seek, which acknowledge
// nothing): a FAILED_PRECONDITION whose ErrorInfo maps each to
// PERMANENT_FAILURE_INVALID_ACK_ID, as Pub/Sub answers; nil when all of
// ids were applied (done lists those) or the subscription is not
// exactly-once.
func invalidAckIDs(sub *subscription, ids, done []string) error {
	if !sub.pol.exactlyOnce || len(done) == len(ids) {
		return nil
	}
	ok := make(map[string]bool, len(done))
	for _, id := range done {
		ok[id] = true
	}
	meta := map[string]string{}
	for _, id := range ids {
		if !ok[id] {
			meta[id] = "PERMANENT_FAILURE_INVALID_ACK_ID"
		}
	}
	st := status.Newf(codes.FailedPrecondition, "subscription %s: %d ack IDs are no longer valid (delivered before the subscription's last seek)", sub.id, len(meta))
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: "EXACTLY_ONCE_ACKID_FAILURE", Domain: "pubsub.googleapis.com", Metadata: meta}); err == nil {
		st = d
	}
	return st.Err()
}
