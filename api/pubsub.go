package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/service"
)

// PubSub is the broker whose topics and subscriptions the API serves under
// /v1/topics and /v1/subscriptions. *pubsub.Broker implements it. Every
// method blocks until the broker answers or ctx (the HTTP request's
// context) is done, is safe for concurrent use, and fails with the typed
// errors of package pubsub (ErrTopicNotFound, ErrInvalidName, ...), which
// the API maps to stable codes.
type PubSub interface {
	CreateTopic(ctx context.Context, name string, cfg pubsub.TopicConfig) (pubsub.TopicInfo, error)
	DeleteTopic(ctx context.Context, name string) error
	ListTopics(ctx context.Context) ([]pubsub.TopicInfo, error)
	Topic(ctx context.Context, name string) (pubsub.TopicInfo, error)
	Publish(ctx context.Context, topic string, data []byte, attributes map[string]string, msgID string) (pubsub.PublishResult, error)
	CreateSubscription(ctx context.Context, name, topic string, cfg pubsub.SubscriptionConfig) (pubsub.SubscriptionInfo, error)
	DeleteSubscription(ctx context.Context, name string) error
	ListSubscriptions(ctx context.Context, topic string) ([]pubsub.SubscriptionInfo, error)
	Subscription(ctx context.Context, name string) (pubsub.SubscriptionInfo, error)
	Pull(ctx context.Context, sub string, max int, ack bool) ([]pubsub.Message, error)
	BrokerIdentity(ctx context.Context) (string, error)
}

var _ PubSub = (*pubsub.Broker)(nil)

// ServerOption configures a Server.
type ServerOption func(*Server)

// WithPubSub serves the topics and subscriptions of ps. Without it (or with
// a nil ps) every /v1/topics and /v1/subscriptions request gets 503
// PUBSUB_UNAVAILABLE.
func WithPubSub(ps PubSub) ServerOption {
	return func(s *Server) {
		if b, ok := ps.(*pubsub.Broker); ok && b == nil {
			ps = nil // a nil *pubsub.Broker is no broker, not one to call
		}
		s.pubsub = ps
	}
}

// PubSubCodes returns the codes of the topic and subscription routes.
func PubSubCodes() []errcode.Code { return errcode.CodesOf(errcode.AreaPubSub) }

// pubsubError gives a broker error its stable code; the message is the
// broker's, which names the topic or subscription concerned.
func pubsubError(err error) error {
	var se *service.Error
	if errors.As(err, &se) {
		return err
	}
	return service.NewError(pubsubCode(err), "%w", err)
}

// pubsubCode returns the code of a broker error: the code of its typed
// error, INTERNAL for others.
func pubsubCode(err error) errcode.Code {
	switch {
	case errors.Is(err, pubsub.ErrTopicNotFound):
		return errcode.TopicNotFound
	case errors.Is(err, pubsub.ErrTopicExists):
		return errcode.TopicExists
	case errors.Is(err, pubsub.ErrSubscriptionNotFound):
		return errcode.SubscriptionNotFound
	case errors.Is(err, pubsub.ErrSubscriptionExists):
		return errcode.SubscriptionExists
	case errors.Is(err, pubsub.ErrInvalidName):
		return errcode.InvalidName
	case errors.Is(err, pubsub.ErrInvalidConfig):
		return errcode.InvalidConfig
	case errors.Is(err, pubsub.ErrMessageTooLarge):
		return errcode.MessageTooLarge
	case errors.Is(err, pubsub.ErrStorageFull):
		return errcode.BrokerStorageFull
	case errors.Is(err, pubsub.ErrUnavailable), errors.Is(err, pubsub.ErrBrokerClosed):
		return errcode.PubSubUnavailable
	}
	return service.ErrorCode(err)
}

func topicOf(i pubsub.TopicInfo) Topic {
	return Topic{Name: i.Name, Subject: i.Subject, Messages: i.Messages, Bytes: i.Bytes, FirstSeq: i.FirstSeq, LastSeq: i.LastSeq,
		Retention: i.Retention.String(), DuplicateWindow: i.DuplicateWindow.String(), Subscriptions: i.Subscriptions, CreateTime: i.Created.UTC()}
}

func subscriptionOf(i pubsub.SubscriptionInfo) Subscription {
	return Subscription{Name: i.Name, Topic: i.Topic, NumPending: i.NumPending, NumAckPending: i.NumAckPending, Backlog: i.Backlog,
		AckFloor: i.AckFloor, Delivered: i.Delivered, AckWait: i.AckWait.String(), CreateTime: i.Created.UTC()}
}

func pulledOf(m pubsub.Message) PulledMessage {
	p := PulledMessage{Attributes: m.Attributes, ID: m.ID, Sequence: m.Sequence, PublishTime: m.PublishTime.UTC(), NumDelivered: m.NumDelivered}
	if utf8.Valid(m.Data) {
		p.Data = string(m.Data)
	} else {
		p.DataBase64 = base64.StdEncoding.EncodeToString(m.Data)
	}
	return p
}

// registerPubSub adds the topic and subscription routes to s.mux.
func (s *Server) registerPubSub() {
	s.handleFunc("POST /v1/topics", s.withPubSub(s.createTopic))
	s.handleFunc("GET /v1/broker", s.withPubSub(s.getBroker))
	s.handleFunc("GET /v1/topics", s.withPubSub(s.listTopics))
	s.handleFunc("GET /v1/topics/{name}", s.withPubSub(s.getTopic))
	s.handleFunc("GET /v1/topics/{name}/messages", s.withPubSub(s.readRetained))
	s.handleFunc("DELETE /v1/topics/{name}", s.withPubSub(s.deleteTopic))
	s.handleActions("topics", "topic", s.withPubSub, namedAction{"publish", s.publishTopic})
	s.handleFunc("POST /v1/subscriptions", s.withPubSub(s.createSubscription))
	s.handleFunc("GET /v1/subscriptions", s.withPubSub(s.listSubscriptions))
	s.handleFunc("GET /v1/subscriptions/{name}", s.withPubSub(s.getSubscription))
	s.handleFunc("DELETE /v1/subscriptions/{name}", s.withPubSub(s.deleteSubscription))
	s.handleActions("subscriptions", "subscription", s.withPubSub, namedAction{"pull", s.pullSubscription},
		namedAction{"seek", s.seekSubscription})
	s.registerSubscriptionSnapshots()
}

// withPubSub answers 503 PUBSUB_UNAVAILABLE when the server has no broker.
func (s *Server) withPubSub(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.pubsub == nil {
			s.writeError(w, service.NewError(errcode.PubSubUnavailable, "this weir server has no Pub/Sub broker: topics and subscriptions are unavailable"))
			return
		}
		h(w, r)
	}
}

// noQuery refuses query parameters but the allowed ones.
func noQuery(r *http.Request, allowed ...string) error {
	for k := range r.URL.Query() {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			known := "none"
			if len(allowed) > 0 {
				known = strings.Join(allowed, ", ")
			}
			return service.NewError(errcode.InvalidRequest, "unknown query parameter %q (known: %s)", k, known)
		}
	}
	return nil
}

// parseDuration reads an optional duration field of a request.
func parseDuration(field, v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, service.NewError(errcode.InvalidRequest, "field %q: %q is not a duration (write it like 168h, 30m or 90s)", field, v)
	}
	if d <= 0 {
		return 0, service.NewError(errcode.InvalidConfig, "field %q: %s must be positive (leave it out for the default)", field, v)
	}
	return d, nil
}

func (s *Server) createTopic(w http.ResponseWriter, r *http.Request) {
	var req CreateTopicRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	retention, err := parseDuration("retention", req.Retention)
	if err != nil {
		s.writeError(w, err)
		return
	}
	s.creating.topics.Lock()
	err = s.admitTopic(r.Context())
	var info pubsub.TopicInfo
	if err == nil {
		info, err = s.pubsub.CreateTopic(r.Context(), req.Name, pubsub.TopicConfig{Retention: retention})
	}
	s.creating.topics.Unlock()
	if err != nil {
		s.writeError(w, pubsubError(err))
		return
	}
	w.Header().Set("Location", "/v1/topics/"+info.Name)
	writeJSON(w, http.StatusCreated, topicOf(info))
}

// getBroker answers the broker's identity.
func (s *Server) getBroker(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, err)
		return
	}
	id, err := s.pubsub.BrokerIdentity(r.Context())
	if err != nil {
		s.writeError(w, pubsubError(err))
		return
	}
	writeJSON(w, http.StatusOK, BrokerInfo{ID: id})
}

func (s *Server) listTopics(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, err)
		return
	}
	infos, err := s.pubsub.ListTopics(r.Context())
	if err != nil {
		s.writeError(w, pubsubError(err))
		return
	}
	out := TopicList{Topics: make([]Topic, 0, len(infos))}
	for _, i := range infos {
		out.Topics = append(out.Topics, topicOf(i))
	}
	writeJSON(w, http.StatusOK, out)
}

// refuseAction answers a GET or DELETE of NAME:ACTION, which needs POST.
func (s *Server) refuseAction(w http.ResponseWriter, r *http.Request) bool {
	if name, action, ok := strings.Cut(r.PathValue("name"), ":"); ok {
		s.writeError(w, service.NewError(errcode.MethodNotAllowed, "%s:%s needs POST, not %s", name, action, r.Method))
		return true
	}
	return false
}

// getNamed serves GET of one topic or subscription: it refuses a
// NAME:ACTION path, reads the named resource with get and answers 200 with
// view's API form of it.
func getNamed[I, V any](s *Server, w http.ResponseWriter, r *http.Request, get func(context.Context, string) (I, error), view func(I) V) {
	if s.refuseAction(w, r) {
		return
	}
	info, err := get(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeError(w, pubsubError(err))
		return
	}
	writeJSON(w, http.StatusOK, view(info))
}

// deleteNamed serves DELETE of one topic or subscription: it refuses a
// NAME:ACTION path and unknown query parameters, runs inUse (which refuses
// a resource active jobs use) unless ?force=true, deletes with del and
// answers 204.
func (s *Server) deleteNamed(w http.ResponseWriter, r *http.Request, inUse, del func(context.Context, string) error) {
	if s.refuseAction(w, r) {
		return
	}
	name := r.PathValue("name")
	force, err := forceParam(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if !force {
		if err := inUse(r.Context(), name); err != nil {
			s.writeError(w, err)
			return
		}
	}
	if err := del(r.Context(), name); err != nil {
		s.writeError(w, pubsubError(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) getTopic(w http.ResponseWriter, r *http.Request) {
	getNamed(s, w, r, s.pubsub.Topic, topicOf)
}

func (s *Server) deleteTopic(w http.ResponseWriter, r *http.Request) {
	s.deleteNamed(w, r, s.refuseInUseTopic, s.pubsub.DeleteTopic)
}

// publishTopic serves POST /v1/topics/{name}:publish.
func (s *Server) publishTopic(w http.ResponseWriter, r *http.Request, name string) {
	var req PublishRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	resp, err := s.publish(r.Context(), name, req.Messages)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// publish checks every message, then publishes them in order. A failure
// part-way leaves the earlier messages published; the error says how many
// (republishing with IDs stores nothing twice).
func (s *Server) publish(ctx context.Context, topic string, msgs []PublishMessage) (*PublishResponse, error) {
	if len(msgs) == 0 {
		return nil, service.NewError(errcode.InvalidRequest, "field \"messages\" is empty: send at least one {data, attributes, id}")
	}
	payloads := make([][]byte, len(msgs))
	for i, m := range msgs {
		p, err := payload(m.Data)
		if err != nil {
			return nil, service.NewError(errcode.InvalidRequest, "message %d: %w", i, err)
		}
		payloads[i] = p
	}
	resp := &PublishResponse{Results: make([]PublishResult, 0, len(msgs))}
	for i, m := range msgs {
		res, err := s.pubsub.Publish(ctx, topic, payloads[i], m.Attributes, m.ID)
		if err != nil {
			if i == 0 {
				return nil, pubsubError(err)
			}
			return nil, service.NewError(pubsubCode(err), "message %d: %w (the %d messages before it were published; republishing them with IDs stores nothing twice)", i, err, i)
		}
		resp.Results = append(resp.Results, PublishResult{Sequence: res.Sequence, Duplicate: res.Duplicate, IDConflict: res.IDConflict})
		switch {
		case res.IDConflict:
			resp.Duplicates++
			resp.IDConflicts++
		case res.Duplicate:
			resp.Duplicates++
		default:
			resp.Published++
		}
	}
	return resp, nil
}

// payload returns the bytes of a message's data: a JSON string's text, or
// any other JSON value compacted.
func payload(data json.RawMessage) ([]byte, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "null" {
		return nil, errors.New(`field "data" is missing: set it to a string or a JSON object`)
	}
	if data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return nil, fmt.Errorf("field \"data\": %w", err)
		}
		return []byte(s), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil, fmt.Errorf("field \"data\": %w", err)
	}
	return buf.Bytes(), nil
}

func (s *Server) createSubscription(w http.ResponseWriter, r *http.Request) {
	var req CreateSubscriptionRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if req.Topic == "" {
		s.writeError(w, service.NewError(errcode.InvalidRequest, "field \"topic\" is missing: name the topic the subscription reads"))
		return
	}
	ackWait, err := parseDuration("ack_wait", req.AckWait)
	if err != nil {
		s.writeError(w, err)
		return
	}
	s.creating.subscriptions.Lock()
	err = s.admitSubscription(r.Context())
	var info pubsub.SubscriptionInfo
	if err == nil {
		info, err = s.pubsub.CreateSubscription(r.Context(), req.Name, req.Topic, pubsub.SubscriptionConfig{AckWait: ackWait, FromBeginning: req.FromBeginning})
	}
	s.creating.subscriptions.Unlock()
	if err != nil {
		s.writeError(w, pubsubError(err))
		return
	}
	w.Header().Set("Location", "/v1/subscriptions/"+info.Name)
	writeJSON(w, http.StatusCreated, subscriptionOf(info))
}

func (s *Server) listSubscriptions(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r, "topic"); err != nil {
		s.writeError(w, err)
		return
	}
	infos, err := s.pubsub.ListSubscriptions(r.Context(), r.URL.Query().Get("topic"))
	if err != nil {
		s.writeError(w, pubsubError(err))
		return
	}
	uses := s.subscriptionUses()
	out := SubscriptionList{Subscriptions: make([]Subscription, 0, len(infos))}
	for _, i := range infos {
		out.Subscriptions = append(out.Subscriptions, withUse(subscriptionOf(i), uses))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getSubscription(w http.ResponseWriter, r *http.Request) {
	getNamed(s, w, r, s.pubsub.Subscription, func(i pubsub.SubscriptionInfo) Subscription {
		return withUse(subscriptionOf(i), s.subscriptionUses())
	})
}

// subscriptionUses returns who made each service-made subscription and
// why it is kept; nil (logged) when the service cannot say.
func (s *Server) subscriptionUses() map[string]service.SubscriptionUse {
	if s.svc == nil {
		return nil
	}
	uses, err := s.svc.SubscriptionUses()
	if err != nil {
		s.logger.Warn("reading who made the subscriptions", "error", err)
		return nil
	}
	return uses
}

// withUse adds to sub who made it, who reads it and why it is kept.
func withUse(sub Subscription, uses map[string]service.SubscriptionUse) Subscription {
	u, ok := uses[sub.Name]
	if !ok {
		return sub
	}
	sub.MadeBy = &SubscriptionJob{JobID: u.MadeBy.ID, JobName: u.MadeBy.Name, State: wireState(u.MadeBy.State), Step: u.Step}
	for _, r := range u.ReadBy {
		sub.ReadBy = append(sub.ReadBy, SubscriptionJob{JobID: r.ID, JobName: r.Name, State: wireState(r.State)})
	}
	sub.Kept, sub.KeepUntil = u.Kept, u.KeepUntil
	return sub
}

func (s *Server) deleteSubscription(w http.ResponseWriter, r *http.Request) {
	s.deleteNamed(w, r, s.refuseInUseSubscription, s.pubsub.DeleteSubscription)
}

// pullSubscription serves POST /v1/subscriptions/{name}:pull.
func (s *Server) pullSubscription(w http.ResponseWriter, r *http.Request, name string) {
	var req PullRequest
	if r.ContentLength != 0 { // an empty body means the defaults
		if err := decode(r, &req); err != nil {
			s.writeError(w, err)
			return
		}
	}
	if req.Max == 0 {
		req.Max = 1
	}
	if req.Max < 0 || req.Max > MaxPull {
		s.writeError(w, service.NewError(errcode.InvalidRequest, "field \"max\" is %d: want 1 to %d", req.Max, MaxPull))
		return
	}
	if req.Ack && !req.Force {
		if err := s.refuseInUse(errcode.SubscriptionInUse, "subscription "+name, "", name,
			"pull without acknowledging to look at its messages (ack: false; weir subscriptions pull without --auto-ack), or acknowledge anyway with force: true (--auto-ack --force)"); err != nil {
			s.writeError(w, err)
			return
		}
	}
	msgs, err := s.pubsub.Pull(r.Context(), name, req.Max, req.Ack)
	if err != nil {
		s.writeError(w, pubsubError(err))
		return
	}
	out := PullResponse{Messages: make([]PulledMessage, 0, len(msgs))}
	for _, m := range msgs {
		out.Messages = append(out.Messages, pulledOf(m))
	}
	writeJSON(w, http.StatusOK, out)
}

// forceParam reads the optional ?force=true of a destructive request (and
// refuses any other query parameter).
func forceParam(r *http.Request) (bool, error) {
	if err := noQuery(r, "force"); err != nil {
		return false, err
	}
	switch v := r.URL.Query().Get("force"); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, service.NewError(errcode.InvalidRequest, "query parameter force=%q: use true or false", v)
	}
}

// refuseInUseTopic refuses deleting topic while an active job writes it,
// reads it, or reads one of its subscriptions.
func (s *Server) refuseInUseTopic(ctx context.Context, topic string) error {
	if err := s.refuseInUse(errcode.TopicInUse, "topic "+topic, topic, "", "delete it anyway with force=true (weir topics delete --force)"); err != nil {
		return err
	}
	subs, err := s.pubsub.ListSubscriptions(ctx, topic)
	if err != nil {
		return nil // the delete itself reports a missing topic or a broker fault
	}
	for _, sub := range subs {
		if err := s.refuseInUse(errcode.TopicInUse, "topic "+topic, "", sub.Name, "delete it anyway with force=true (weir topics delete --force)"); err != nil {
			return err
		}
	}
	return nil
}

// refuseInUseSubscription refuses deleting subscription sub while an
// active job reads it.
func (s *Server) refuseInUseSubscription(_ context.Context, sub string) error {
	return s.refuseInUse(errcode.SubscriptionInUse, "subscription "+sub, "", sub, "delete it anyway with force=true (weir subscriptions delete --force)")
}

// refuseInUse returns a code error naming the active jobs that use topic or
// sub, or nil when none does.
func (s *Server) refuseInUse(code errcode.Code, what, topic, sub, hint string) error {
	uses, err := s.svc.PubSubUsers(topic, sub)
	if err != nil {
		return err
	}
	if len(uses) == 0 {
		return nil
	}
	parts := make([]string, 0, len(uses))
	for _, u := range uses {
		parts = append(parts, fmt.Sprintf("job %s (%s, %s) step %q %s", u.Job.Name, u.Job.ID, u.Job.State, u.Step, u.Use))
	}
	return service.NewError(code, "%s is in use: %s; drain or cancel the job first, or %s", what, strings.Join(parts, "; "), hint)
}
