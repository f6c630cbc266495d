package pubsubgrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/weir-dev/weir/io/pubsub"
)

// Metadata keys this API stores with its subscriptions.
const (
	metaAPI      = "pubsub.api"
	metaOrdering = "pubsub.enable_message_ordering"
	metaLabel    = "pubsub.label."
)

// subscription is what calls need of a subscription, cached by ID.
type subscription struct {
	id, topic, stream string
	cons              jetstream.Consumer
	perMessage        bool
	ordered           bool // enable_message_ordering
	ackWait           time.Duration
	pol               policies // dead letter, retry, filter, exactly once, detached (policies.go)
}

// lookup returns subscription id, from the cache or the broker.
func (s *Server) lookup(ctx context.Context, id string) (*subscription, error) {
	s.mu.Lock()
	sub, ok := s.subs[id]
	s.mu.Unlock()
	if ok {
		return sub, nil
	}
	topic, cons, err := s.b.SubscriptionConsumer(ctx, id)
	if err != nil {
		return nil, statusOf(err)
	}
	stream, _ := pubsub.TopicStream(topic)
	ci := cons.CachedInfo()
	sub = &subscription{id: id, topic: topic, stream: stream, cons: cons,
		perMessage: ci.Config.AckPolicy == jetstream.AckExplicitPolicy, ordered: ci.Config.Metadata[metaOrdering] == "true",
		ackWait: ci.Config.AckWait, pol: policiesOf(ci.Config.Metadata)}
	s.mu.Lock()
	s.subs[id] = sub
	s.mu.Unlock()
	return sub, nil
}

func (s *Server) forget(id string) {
	s.mu.Lock()
	delete(s.subs, id)
	s.mu.Unlock()
}

func (s *Server) forgetTopic(topic string) {
	s.mu.Lock()
	for id, sub := range s.subs {
		if sub.topic == topic {
			delete(s.subs, id)
		}
	}
	s.mu.Unlock()
}

// readable returns subscription id for pulling and acknowledging: it must
// acknowledge per message (see the package documentation).
func (s *Server) readable(ctx context.Context, name string) (*subscription, error) {
	_, id, err := s.parseName("subscription", name, kindSubscriptions)
	if err != nil {
		return nil, err
	}
	sub, err := s.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := checkDetached(sub); err != nil {
		return nil, err
	}
	if !sub.perMessage {
		return nil, status.Errorf(codes.FailedPrecondition,
			"subscription %s acknowledges cumulatively at checkpoints (%s), and this API acknowledges each message: "+
				"create a subscription of topic %s through the Pub/Sub API (or `weir subscriptions create`'s per-message counterpart) and pull from it",
			id, s.reader(ctx, id), sub.topic)
	}
	return sub, nil
}

// reader words who reads a cumulative subscription.
func (s *Server) reader(ctx context.Context, id string) string {
	job := ""
	if s.opts.JobOfSubscription != nil {
		job = s.opts.JobOfSubscription(ctx, id)
	} else if j, _, ok := strings.Cut(id, "--"); ok {
		job = j
	}
	if job != "" {
		return "it is read by weir job " + job
	}
	return "it was created with weir's HTTP API or CLI"
}

// CreateSubscription implements the Subscriber service.
func (s *Server) CreateSubscription(ctx context.Context, req *pubsubpb.Subscription) (*pubsubpb.Subscription, error) {
	project, id, err := s.parseName("name", req.GetName(), kindSubscriptions)
	if err != nil {
		return nil, err
	}
	_, topic, err := s.parseName("topic", req.GetTopic(), kindTopics)
	if err != nil {
		return nil, err
	}
	unsupported := ""
	switch {
	case req.GetPushConfig().GetPushEndpoint() != "":
		unsupported = "push_config (push delivery)"
	case req.GetBigqueryConfig() != nil:
		unsupported = "bigquery_config"
	case req.GetCloudStorageConfig() != nil:
		unsupported = "cloud_storage_config"
	case req.GetBigtableConfig() != nil:
		unsupported = "bigtable_config"
	case req.GetDetached():
		unsupported = "detached (detach an existing subscription with DetachSubscription)"
	case len(req.GetMessageTransforms()) > 0:
		unsupported = "message_transforms"
	}
	if unsupported != "" {
		return nil, invalid("subscription %s: %s is not supported by weir", req.GetName(), unsupported)
	}
	ackWait := DefaultAckDeadline
	if secs := req.GetAckDeadlineSeconds(); secs != 0 {
		ackWait = time.Duration(secs) * time.Second
		if ackWait < DefaultAckDeadline || ackWait > MaxAckDeadline {
			return nil, invalid("subscription %s: ack_deadline_seconds %d: want 10 to 600", req.GetName(), secs)
		}
	}
	meta := map[string]string{metaAPI: "v1", metaOrdering: strconv.FormatBool(req.GetEnableMessageOrdering())}
	for k, v := range req.GetLabels() {
		meta[metaLabel+k] = v
	}
	if _, err := parseFilter(req.GetFilter()); err != nil {
		return nil, invalid("subscription %s: %v", req.GetName(), err)
	} else if req.GetFilter() != "" {
		meta[metaFilter] = req.GetFilter()
	}
	if err := s.policyMeta(ctx, "subscription "+req.GetName(), req, meta); err != nil {
		return nil, err
	}
	s.creatingSub.Lock()
	defer s.creatingSub.Unlock()
	if s.opts.MaxSubscriptions > 0 {
		all, err := s.b.ListSubscriptions(ctx, "")
		if err != nil {
			return nil, statusOf(err)
		}
		if len(all) >= s.opts.MaxSubscriptions {
			return nil, status.Errorf(codes.ResourceExhausted, "the server already has %d subscriptions, its limit (--max-subscriptions %d): delete one first, or restart the server with a higher --max-subscriptions", len(all), s.opts.MaxSubscriptions)
		}
	}
	info, err := s.b.CreateSubscription(ctx, id, topic, pubsub.SubscriptionConfig{AckWait: ackWait, PerMessageAck: true, Metadata: meta})
	if err != nil {
		return nil, statusOf(err)
	}
	s.forget(id)
	s.forgetOrdering(id) // a subscription of the same name before this one
	return s.subscriptionProto(ctx, project, info), nil
}

func (s *Server) subscriptionProto(ctx context.Context, project string, info pubsub.SubscriptionInfo) *pubsubpb.Subscription {
	p := &pubsubpb.Subscription{
		Name:                  subName(project, info.Name),
		Topic:                 topicName(project, info.Topic),
		AckDeadlineSeconds:    int32(info.AckWait / time.Second),
		EnableMessageOrdering: info.Metadata[metaOrdering] == "true",
		RetainAckedMessages:   true, // topics keep messages by age, acknowledged or not
		ExpirationPolicy:      &pubsubpb.ExpirationPolicy{},
		State:                 pubsubpb.Subscription_ACTIVE,
	}
	p.Labels = labelsOf(info.Metadata)
	fillPolicies(p, project, info.Metadata)
	if t, err := s.b.Topic(ctx, info.Topic); err == nil {
		p.MessageRetentionDuration = durationpb.New(t.Retention)
		p.TopicMessageRetentionDuration = durationpb.New(t.Retention)
	}
	return p
}

// GetSubscription implements the Subscriber service.
func (s *Server) GetSubscription(ctx context.Context, req *pubsubpb.GetSubscriptionRequest) (*pubsubpb.Subscription, error) {
	project, id, err := s.parseName("subscription", req.GetSubscription(), kindSubscriptions)
	if err != nil {
		return nil, err
	}
	info, err := s.b.Subscription(ctx, id)
	if err != nil {
		return nil, statusOf(err)
	}
	return s.subscriptionProto(ctx, project, info), nil
}

// ListSubscriptions implements the Subscriber service: every
// subscription, by name (weir's cumulative ones included).
func (s *Server) ListSubscriptions(ctx context.Context, req *pubsubpb.ListSubscriptionsRequest) (*pubsubpb.ListSubscriptionsResponse, error) {
	project, err := s.parseProject("project", req.GetProject())
	if err != nil {
		return nil, err
	}
	all, err := s.b.ListSubscriptions(ctx, "")
	if err != nil {
		return nil, statusOf(err)
	}
	items, next := page(all, func(i pubsub.SubscriptionInfo) string { return i.Name }, req.GetPageSize(), req.GetPageToken())
	resp := &pubsubpb.ListSubscriptionsResponse{NextPageToken: next}
	for _, i := range items {
		resp.Subscriptions = append(resp.Subscriptions, s.subscriptionProto(ctx, project, i))
	}
	return resp, nil
}

// DeleteSubscription implements the Subscriber service.
func (s *Server) DeleteSubscription(ctx context.Context, req *pubsubpb.DeleteSubscriptionRequest) (*emptypb.Empty, error) {
	_, id, err := s.parseName("subscription", req.GetSubscription(), kindSubscriptions)
	if err != nil {
		return nil, err
	}
	s.forget(id)
	s.forgetOrdering(id)
	if err := s.b.DeleteSubscription(ctx, id); err != nil {
		return nil, statusOf(err)
	}
	return &emptypb.Empty{}, nil
}

// Pull implements the Subscriber service: it returns the messages
// available now, up to max_messages, waiting up to Options.PullWait for a
// first one unless return_immediately.
func (s *Server) Pull(ctx context.Context, req *pubsubpb.PullRequest) (*pubsubpb.PullResponse, error) {
	sub, err := s.readable(ctx, req.GetSubscription())
	if err != nil {
		return nil, err
	}
	max := int(req.GetMaxMessages())
	if max <= 0 {
		return nil, invalid("pull from %s: max_messages must be positive", req.GetSubscription())
	}
	// A pull returns at most MaxPullMessages, as Google's does: a client
	// may ask for more (max_messages is an int32), and the broker's
	// client allocates room for as many as it is asked for.
	max = min(max, MaxPullMessages)
	resp := &pubsubpb.PullResponse{}
	got, err := s.fetch(ctx, sub, max, 0)
	if err != nil {
		return nil, err
	}
	if len(got) == 0 && !req.GetReturnImmediately() {
		wait := s.opts.PullWait
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl)-100*time.Millisecond)
		}
		if wait > 0 {
			if got, err = s.fetch(ctx, sub, 1, wait); err != nil {
				return nil, err
			}
			if len(got) == 1 && max > 1 {
				more, err := s.fetch(ctx, sub, max-1, 0)
				if err != nil {
					return nil, err
				}
				got = append(got, more...)
			}
		}
	}
	resp.ReceivedMessages = got
	return resp, nil
}

// nowWait is the expiry of a pull request for the messages available now.
const nowWait = 10 * time.Millisecond

// fetch pulls up to n messages of sub, waiting up to wait for them (0: the
// ones available now).
func (s *Server) fetch(ctx context.Context, sub *subscription, n int, wait time.Duration) ([]*pubsubpb.ReceivedMessage, error) {
	gen, err := s.b.AckGeneration(ctx, sub.id) // before the fetch: see admitted
	if err != nil {
		return nil, statusOf(err)
	}
	if err := s.orderedReady(ctx, sub); err != nil {
		return nil, err
	}
	// Messages an acknowledgement released first (ordering keys); with
	// some, the pull does not wait for more.
	out, _, err := s.readyMessages(ctx, sub, n)
	if err != nil {
		return nil, err
	}
	if n -= len(out); n <= 0 {
		return out, nil
	}
	if len(out) > 0 {
		wait = 0
	}
	unlock := s.lockFetch(sub)
	defer unlock()
	var batch jetstream.MessageBatch
	// With a byte bound, so that a pull of large messages stays within
	// what the client takes; "now" is a short expiry (a no-wait request
	// cannot carry one).
	batch, err = sub.cons.Fetch(n, jetstream.FetchMaxWait(max(wait, nowWait)), jetstream.FetchMaxBytes(fetchMaxBytes))
	if err != nil {
		return nil, s.fetchStatus(sub, err)
	}
	for {
		select {
		case m, ok := <-batch.Messages():
			if !ok {
				if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrTimeout) {
					return out, s.fetchStatus(sub, err)
				}
				return out, nil
			}
			rm, ok, err := s.admitted(ctx, sub, m, gen)
			if err != nil {
				return out, err
			}
			if ok {
				out = append(out, rm)
			}
		case <-ctx.Done():
			go nakRest(batch)
			for _, rm := range out { // not returned: deliver them again now
				reply, _ := splitAckID(rm.GetAckId())
				_ = s.b.Conn().Publish(reply, []byte("-NAK"))
			}
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
}

// admitted converts delivery m of sub, fetched in generation gen, and says
// whether it goes to the client: not when a seek came between the fetch
// and now (it is given back at once: JetStream may have delivered it
// before the seek, so its ack ID could not tell), when a seek restored it
// as acknowledged, or when it is held back behind a redelivered message of
// its ordering key. Its ack ID carries gen.
func (s *Server) admitted(ctx context.Context, sub *subscription, m jetstream.Msg, gen uint64) (*pubsubpb.ReceivedMessage, bool, error) {
	rm, err := received(m)
	if err != nil {
		_ = m.Nak()
		return nil, false, status.Error(codes.Internal, err.Error())
	}
	if now, err := s.b.AckGeneration(ctx, sub.id); err != nil {
		_ = m.Nak()
		return nil, false, statusOf(err)
	} else if now != gen {
		_ = m.Nak()
		return nil, false, nil
	}
	rm.AckId = ackID(m.Reply(), gen)
	if done, err := s.b.AckRestored(ctx, sub.id, m); err != nil {
		_ = m.Nak()
		return nil, false, statusOf(err)
	} else if done {
		return nil, false, nil // a seek to a snapshot restored it as acknowledged
	}
	if md, err := m.Metadata(); err == nil {
		if ok, err := s.screen(ctx, sub, m, rm, md.NumDelivered); err != nil || !ok {
			return nil, false, err
		}
	}
	if sub.ordered && !s.ordering(sub.id).admit(m, rm.GetMessage().GetOrderingKey()) {
		return nil, false, nil // held back behind the outstanding message of its key
	}
	return rm, true, nil
}

// ackID is the ack ID of a delivery: its reply subject, and the
// generation of the subscription's deliveries it was fetched in
// (pubsub.Broker.AckGeneration) after a '#' unless that is 0.
func ackID(reply string, gen uint64) string {
	if gen == 0 {
		return reply
	}
	return reply + "#" + strconv.FormatUint(gen, 10)
}

// splitAckID returns the reply subject and generation of an ack ID.
func splitAckID(id string) (reply string, gen uint64) {
	reply, g, ok := strings.Cut(id, "#")
	if ok {
		gen, _ = strconv.ParseUint(g, 10, 64)
	}
	return reply, gen
}

// current returns the ack IDs of ids fetched in sub's current generation
// of deliveries. The others were made before a seek (or before the
// subscription was created again): JetStream ignores their
// acknowledgements, or would apply them to a later delivery, so they are
// dropped, as Pub/Sub drops acknowledgements of ack IDs that are no
// longer valid.
func (s *Server) current(ctx context.Context, sub *subscription, ids []string) ([]string, error) {
	gen, err := s.b.AckGeneration(ctx, sub.id)
	if err != nil {
		return nil, statusOf(err)
	}
	out := ids[:0:0]
	for _, id := range ids {
		if _, g := splitAckID(id); g == gen {
			out = append(out, id)
		}
	}
	if n := len(ids) - len(out); n > 0 {
		s.log.Debug("ignoring ack IDs of deliveries made before the subscription's last seek", "subscription", sub.id, "ack_ids", n)
	}
	return out, nil
}

func (s *Server) fetchStatus(sub *subscription, err error) error {
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrStreamNotFound) {
		s.forget(sub.id)
		return status.Errorf(codes.NotFound, "subscription %s does not exist", sub.id)
	}
	return statusOf(fmt.Errorf("pulling from %s: %w: %w", sub.id, pubsub.ErrUnavailable, err))
}

// nakRest delivers again, at once, what a fetch abandoned got.
func nakRest(batch jetstream.MessageBatch) {
	for m := range batch.Messages() {
		_ = m.Nak()
	}
}

// received converts a JetStream message; its ack ID is its reply subject.
func received(m jetstream.Msg) (*pubsubpb.ReceivedMessage, error) {
	md, err := m.Metadata()
	if err != nil {
		return nil, fmt.Errorf("reading message metadata: %w", err)
	}
	pm := &pubsubpb.PubsubMessage{
		Data:        m.Data(),
		MessageId:   strconv.FormatUint(md.Sequence.Stream, 10),
		PublishTime: timestamppb.New(md.Timestamp),
	}
	for k, v := range m.Headers() {
		if len(v) == 0 || len(k) >= 5 && strings.EqualFold(k[:5], "nats-") {
			continue
		}
		if k == OrderingKeyAttribute {
			pm.OrderingKey = v[0]
			continue
		}
		if pm.Attributes == nil {
			pm.Attributes = make(map[string]string, len(m.Headers()))
		}
		pm.Attributes[k] = v[0]
	}
	return &pubsubpb.ReceivedMessage{AckId: m.Reply(), Message: pm}, nil
}

// checkAckIDs refuses ack IDs that are not deliveries of sub: an ack ID is
// the reply subject of a delivery, $JS.ACK.<stream>.<consumer>.… (or, with
// a domain and account, $JS.ACK.<domain>.<account>.<stream>.<consumer>.…).
func checkAckIDs(sub *subscription, ids []string) error {
	for _, id := range ids {
		rest, ok := strings.CutPrefix(id, "$JS.ACK.")
		tok := strings.Split(rest, ".")
		switch {
		case ok && len(tok) == 7 && tok[0] == sub.stream && tok[1] == pubsub.NATSName(sub.id):
		case ok && len(tok) >= 10 && tok[2] == sub.stream && tok[3] == pubsub.NATSName(sub.id):
		default:
			return invalid("ack ID %.80q is not one of subscription %s's", id, sub.id)
		}
	}
	return nil
}

// ack acknowledges the deliveries ids of sub, records them for snapshots
// (pubsub.Broker.RecordAcks), and waits until the broker has both. It
// returns the ids it acknowledged: those of deliveries made before the
// subscription's last seek are ignored (see current).
func (s *Server) ack(ctx context.Context, sub *subscription, ids []string) ([]string, error) {
	ids, err := s.current(ctx, sub, ids)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	return ids, s.ackCurrent(ctx, sub, ids)
}

func (s *Server) ackCurrent(ctx context.Context, sub *subscription, ids []string) error {
	ctx, cancel := bounded(ctx)
	defer cancel()
	nc := s.b.Conn()
	for _, id := range ids {
		reply, _ := splitAckID(id)
		if err := nc.Publish(reply, []byte("+ACK")); err != nil {
			return statusOf(fmt.Errorf("acknowledging: %w: %w", pubsub.ErrUnavailable, err))
		}
	}
	// The record goes out right behind the acknowledgements; its store
	// and the flush of the acknowledgements are awaited together.
	stored, err := s.b.StartRecordAcks(ctx, sub.id, ids)
	if err != nil {
		return statusOf(err)
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		_ = stored(ctx)
		return statusOf(fmt.Errorf("acknowledging: %w: %w", pubsub.ErrUnavailable, err))
	}
	if err := stored(ctx); err != nil {
		return statusOf(err)
	}
	return nil
}

// flushTimeout bounds the broker's confirmation of acknowledgements and
// deadline changes when the call has no deadline of its own (a REST call,
// a streaming pull, a client that sets none): the flush needs one.
const flushTimeout = 30 * time.Second

// bounded returns ctx with a deadline of flushTimeout unless it has one.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, flushTimeout)
}

// modAck sets the deadline of the deliveries ids to d from now (0:
// deliver them again at once), and waits until the broker has the changes.
func (s *Server) modAck(ctx context.Context, sub *subscription, ids []string, d time.Duration) error {
	ids, err := s.current(ctx, sub, ids)
	if err != nil || len(ids) == 0 {
		return err
	}
	if d == 0 {
		if ids = s.deadLetterNacked(ctx, sub, ids); len(ids) == 0 {
			return nil
		}
	}
	if d == 0 && sub.ordered {
		s.ordering(sub.id).nacked(ids) // before the broker can deliver them again
	}
	if d == 0 && sub.pol.retry {
		// The retry policy: each comes again after its backoff.
		for _, id := range ids {
			if err := s.nak(sub, []string{id}, sub.pol.backoff(ackDelivered(id))); err != nil {
				return err
			}
		}
	} else if err := s.nak(sub, ids, d); err != nil {
		return err
	}
	fctx, cancel := bounded(ctx)
	defer cancel()
	if err := s.b.Conn().FlushWithContext(fctx); err != nil {
		return statusOf(fmt.Errorf("modifying ack deadlines: %w: %w", pubsub.ErrUnavailable, err))
	}
	return nil
}

// nak sends the deadline changes of modAck without waiting: a NAK with a
// delay keeps a delivery pending and moves its deadline to d from now; a
// deadline of the subscription's ack wait is a progress report (+WPI),
// which the broker handles much faster (no timer reset).
func (s *Server) nak(sub *subscription, ids []string, d time.Duration) error {
	body := []byte("-NAK")
	if d == sub.ackWait {
		body = []byte("+WPI")
	} else if d > 0 {
		opt, _ := json.Marshal(struct {
			Delay time.Duration `json:"delay"`
		}{d})
		body = append([]byte("-NAK "), opt...)
	}
	nc := s.b.Conn()
	for _, id := range ids {
		reply, _ := splitAckID(id)
		if err := nc.Publish(reply, body); err != nil {
			return statusOf(fmt.Errorf("modifying ack deadlines: %w: %w", pubsub.ErrUnavailable, err))
		}
	}
	return nil
}

func deadline(secs int32) (time.Duration, error) {
	if secs < 0 || time.Duration(secs)*time.Second > MaxAckDeadline {
		return 0, invalid("ack deadline %ds: want 0 to 600", secs)
	}
	return time.Duration(secs) * time.Second, nil
}

// Acknowledge implements the Subscriber service.
func (s *Server) Acknowledge(ctx context.Context, req *pubsubpb.AcknowledgeRequest) (*emptypb.Empty, error) {
	sub, err := s.readable(ctx, req.GetSubscription())
	if err != nil {
		return nil, err
	}
	if len(req.GetAckIds()) == 0 {
		return nil, invalid("acknowledge on %s: no ack_ids", req.GetSubscription())
	}
	if err := checkAckIDs(sub, req.GetAckIds()); err != nil {
		return nil, err
	}
	done, err := s.ack(ctx, sub, req.GetAckIds())
	if err != nil {
		return nil, err
	}
	s.acked(sub.id, req.GetAckIds())
	if sub.ordered {
		s.ordering(sub.id).acked(done)
	}
	if err := invalidAckIDs(sub, req.GetAckIds(), done); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

// ModifyAckDeadline implements the Subscriber service.
func (s *Server) ModifyAckDeadline(ctx context.Context, req *pubsubpb.ModifyAckDeadlineRequest) (*emptypb.Empty, error) {
	sub, err := s.readable(ctx, req.GetSubscription())
	if err != nil {
		return nil, err
	}
	d, err := deadline(req.GetAckDeadlineSeconds())
	if err != nil {
		return nil, err
	}
	if len(req.GetAckIds()) == 0 {
		return nil, invalid("modify ack deadline on %s: no ack_ids", req.GetSubscription())
	}
	if err := checkAckIDs(sub, req.GetAckIds()); err != nil {
		return nil, err
	}
	if err := s.modAck(ctx, sub, req.GetAckIds(), d); err != nil {
		return nil, err
	}
	s.extended(sub.id, req.GetAckIds(), d)
	if sub.pol.exactlyOnce {
		cur, err := s.current(ctx, sub, req.GetAckIds())
		if err != nil {
			return nil, err
		}
		if err := invalidAckIDs(sub, req.GetAckIds(), cur); err != nil {
			return nil, err
		}
	}
	return &emptypb.Empty{}, nil
}

// Seek implements the Subscriber service. To a time: messages published
// before it count as acknowledged, the others as not (delivered again). To
// a snapshot: the messages the snapshot holds as acknowledged (up to its
// acknowledgement floor, and those acknowledged one by one above it) count
// as acknowledged and are not delivered again; every other message is.
func (s *Server) Seek(ctx context.Context, req *pubsubpb.SeekRequest) (*pubsubpb.SeekResponse, error) {
	sub, err := s.readable(ctx, req.GetSubscription())
	if err != nil {
		return nil, err
	}
	var target pubsub.SeekTarget
	switch t := req.GetTime(); {
	case t != nil:
		if err := t.CheckValid(); err != nil {
			return nil, invalid("seek on %s: time: %v", req.GetSubscription(), err)
		}
		target.Time = t.AsTime()
	case req.GetSnapshot() != "":
		if target.Snapshot, err = s.seekSnapshot(ctx, sub, req.GetSnapshot()); err != nil {
			return nil, err
		}
	default:
		return nil, invalid("seek on %s: set time or snapshot", req.GetSubscription())
	}
	res, err := s.b.Seek(ctx, sub.id, target)
	if err != nil {
		return nil, snapshotStatus(err)
	}
	s.forgetOrdering(sub.id) // every message after the floor is delivered anew, in order
	s.log.Info("subscription sought", "subscription", sub.id, "ack_floor", res.AckFloor)
	return &pubsubpb.SeekResponse{}, nil
}
