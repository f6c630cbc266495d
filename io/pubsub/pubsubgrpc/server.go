package pubsubgrpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/weir-dev/weir/io/pubsub"
)

// OrderingKeyAttribute is the attribute (NATS header) that carries a
// message's ordering key.
const OrderingKeyAttribute = "goog_ordering_key"

// Defaults and bounds of the API, as Pub/Sub defines them.
const (
	// DefaultAckDeadline is a new subscription's ack deadline when the
	// request sets none.
	DefaultAckDeadline = 10 * time.Second
	// MaxAckDeadline is the longest ack deadline.
	MaxAckDeadline = 600 * time.Second
	// DefaultMaxOutstanding is how many unacknowledged messages a streaming
	// pull holds at most when the client sets no max_outstanding_messages.
	DefaultMaxOutstanding = 1000
	// MaxPullMessages is the most messages one Pull returns, whatever its
	// max_messages (Google's Pull returns at most 1,000 too).
	MaxPullMessages = 1000
	// DefaultPullWait is how long Pull waits for a first message when none
	// is available (Options.PullWait).
	DefaultPullWait = 5 * time.Second
	// maxMessageBytes is the largest message data Publish accepts (Pub/Sub's
	// limit, 10 MB; the embedded broker takes it with its attributes, an
	// external NATS server as far as its max_payload allows).
	maxMessageBytes = 10 << 20
	// MaxPublishMessages is the most messages one Publish takes, and
	// MaxPublishBytes the most bytes of data, attributes and ordering keys
	// in all (Pub/Sub's limits: Google's clients send batches within them).
	MaxPublishMessages = 1000
	MaxPublishBytes    = 10 << 20
	// MaxAttributes is the most attributes a message may have (Pub/Sub's
	// limit).
	MaxAttributes = 100
	// fetchMaxBytes bounds what one pull request to the broker brings
	// (and so one response to a client: Google's clients take at most
	// 20 MiB): more than one largest message, which must fit.
	fetchMaxBytes = 16 << 20
	// maxRequestBytes is the largest request the server reads (a publish
	// of up to 10 MB, as Pub/Sub allows, with its framing).
	maxRequestBytes = 16 << 20
)

// Authenticator checks the bearer token of a request; the server's API
// guard (api.Guard) is one.
type Authenticator interface {
	// Authenticates says whether a token is needed at all.
	Authenticates() bool
	// CheckBearer says whether token is accepted for a request from client
	// (an IP); a positive wait means client failed too often and must wait
	// that long (the token was checked and failed: a valid one is accepted
	// whatever the failures of its client).
	CheckBearer(client, token, what string) (ok bool, wait time.Duration)
}

// Options configure a Server. Zero values take the documented defaults.
type Options struct {
	// Project, when set, is the only project ID the server accepts
	// (--pubsub-project); "": any.
	Project string
	// Auth checks the "authorization: Bearer TOKEN" metadata of every call;
	// nil: no authentication.
	Auth Authenticator
	// TLS, when set, serves TLS.
	TLS *tls.Config
	// PullWait is how long Pull waits for a first message. Default
	// DefaultPullWait.
	PullWait time.Duration
	// JobOfSubscription names the job that reads a cumulative subscription,
	// for FAILED_PRECONDITION messages; nil: derived from weir's naming of
	// a job's subscriptions (JOB--STEP).
	JobOfSubscription func(ctx context.Context, sub string) string
	// MaxTopics and MaxSubscriptions bound the topics (dead-letter topics
	// not counted) and subscriptions that exist when a client creates one
	// (RESOURCE_EXHAUSTED past them, naming --max-topics or
	// --max-subscriptions); 0 or less: no bound.
	MaxTopics, MaxSubscriptions int
	// Logger receives the server's logs. Default slog.Default().
	Logger *slog.Logger
	// Clock tells the time for the ordering keys' bound after a restart
	// (see ordering.go); nil: time.Now. Tests inject one.
	Clock func() time.Time
}

// Server serves the Publisher and Subscriber services over a broker.
// Serve, then Stop.
type Server struct {
	pubsubpb.UnimplementedPublisherServer
	pubsubpb.UnimplementedSubscriberServer

	b    *pubsub.Broker
	opts Options
	log  *slog.Logger
	grpc *grpc.Server

	mu   sync.Mutex
	subs map[string]*subscription // guarded by mu: by subscription ID
	// streams are the open streaming pulls, by subscription ID (guarded by
	// mu): an acknowledgement or deadline change sent outside a stream
	// (Google's clients send them with Acknowledge and ModifyAckDeadline)
	// frees the slots of the streams that delivered the messages.
	streams map[string]map[*streamPull]struct{}
	// ordered is the ordering-key state of ordered subscriptions, by ID
	// (guarded by mu; see ordering.go).
	ordered map[string]*orderedKeys

	// creating serialises creations with their limit check (leaves: no
	// other lock is taken while one is held, but the broker's own).
	creatingTopic, creatingSub sync.Mutex
}

// New returns a server over b.
func New(b *pubsub.Broker, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.PullWait <= 0 {
		opts.PullWait = DefaultPullWait
	}
	s := &Server{b: b, opts: opts, log: opts.Logger.With("component", "pubsub-grpc"), subs: make(map[string]*subscription),
		streams: make(map[string]map[*streamPull]struct{})}
	sopts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(s.unaryRecover, s.unaryAuth),
		grpc.ChainStreamInterceptor(s.streamRecover, s.streamAuth),
		grpc.MaxRecvMsgSize(maxRequestBytes),
	}
	if opts.TLS != nil {
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(opts.TLS)))
	}
	s.grpc = grpc.NewServer(sopts...)
	pubsubpb.RegisterPublisherServer(s.grpc, s)
	pubsubpb.RegisterSubscriberServer(s.grpc, s)
	return s
}

// Serve serves on ln until Stop; it returns nil after Stop.
func (s *Server) Serve(ln net.Listener) error {
	s.log.Info("Pub/Sub gRPC API serving", "listen", ln.Addr().String(), "tls", s.opts.TLS != nil, "auth", s.opts.Auth != nil && s.opts.Auth.Authenticates())
	if err := s.grpc.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serving the Pub/Sub gRPC API: %w", err)
	}
	return nil
}

// Stop ends every call (streaming pulls included: their unacknowledged
// messages are redelivered after their deadline) and stops serving. It
// waits for in-flight unary calls up to ctx's end. Messages kept back
// behind their ordering keys' outstanding messages go back to the broker
// at once.
func (s *Server) Stop(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
	}
	s.givePendingBack()
}

func (s *Server) unaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := s.authenticate(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (s *Server) streamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := s.authenticate(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return h(srv, ss)
}

// authenticate checks the call's bearer token when the server needs one.
func (s *Server) authenticate(ctx context.Context, method string) error {
	if s.opts.Auth == nil || !s.opts.Auth.Authenticates() {
		return nil
	}
	client := "unknown"
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		client = p.Addr.String()
		if host, _, err := net.SplitHostPort(client); err == nil {
			client = host
		}
	}
	token, found := "", false
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if t, ok := strings.CutPrefix(v, "Bearer "); ok {
			token, found = strings.TrimSpace(t), true
			break
		}
	}
	if !found {
		ok, wait := s.opts.Auth.CheckBearer(client, "", method)
		if wait > 0 {
			return status.Errorf(codes.ResourceExhausted, "too many failed authentications from %s: retry after %ds", client, int(wait.Seconds()+0.999))
		}
		if !ok {
			return status.Error(codes.Unauthenticated, "no bearer token: send the metadata \"authorization: Bearer TOKEN\" (the token of the server's --auth-token-file; see docs/PUBSUB.md)")
		}
		return nil
	}
	ok, wait := s.opts.Auth.CheckBearer(client, token, method)
	if wait > 0 {
		return status.Errorf(codes.ResourceExhausted, "too many failed authentications from %s: retry after %ds", client, int(wait.Seconds()+0.999))
	}
	if !ok {
		return status.Error(codes.Unauthenticated, "wrong bearer token (the server accepts the tokens of its --auth-token-file)")
	}
	return nil
}

// statusOf maps a broker error to the API's status codes.
func statusOf(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err // already a status
	}
	msg := err.Error()
	switch {
	case errors.Is(err, pubsub.ErrInvalidName), errors.Is(err, pubsub.ErrInvalidConfig):
		return status.Error(codes.InvalidArgument, msg)
	case errors.Is(err, pubsub.ErrTopicNotFound), errors.Is(err, pubsub.ErrSubscriptionNotFound):
		return status.Error(codes.NotFound, msg)
	case errors.Is(err, pubsub.ErrTopicExists), errors.Is(err, pubsub.ErrSubscriptionExists):
		return status.Error(codes.AlreadyExists, msg)
	case errors.Is(err, pubsub.ErrUnavailable), errors.Is(err, pubsub.ErrBrokerClosed):
		return status.Error(codes.Unavailable, msg)
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, msg)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, msg)
	}
	return status.Error(codes.Internal, msg)
}

func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

// Resource kinds in names.
const (
	kindTopics        = "topics"
	kindSubscriptions = "subscriptions"
	kindSnapshots     = "snapshots"
)

// parseName splits projects/{project}/{kind}/{id}, checking the project
// (Options.Project) and the ID (weir's name rule; a topic may also be a
// dead-letter topic).
func (s *Server) parseName(field, name, kind string) (project, id string, err error) {
	parts := strings.Split(name, "/")
	if len(parts) != 4 || parts[0] != "projects" || parts[2] != kind || parts[1] == "" || parts[3] == "" {
		return "", "", invalid("%s %q: want projects/{project}/%s/{id}", field, name, kind)
	}
	project, id = parts[1], parts[3]
	if err := s.checkProject(field, project); err != nil {
		return "", "", err
	}
	singular := strings.TrimSuffix(kind, "s")
	if kind == kindTopics {
		if _, err := pubsub.TopicStream(id); err != nil {
			return "", "", invalid("%s %q: %v", field, name, err)
		}
	} else if err := pubsub.ValidateName(singular, id); err != nil {
		return "", "", invalid("%s %q: %v", field, name, err)
	}
	return project, id, nil
}

// parseProject reads projects/{project}.
func (s *Server) parseProject(field, name string) (string, error) {
	p, ok := strings.CutPrefix(name, "projects/")
	if !ok || p == "" || strings.Contains(p, "/") {
		return "", invalid("%s %q: want projects/{project}", field, name)
	}
	return p, s.checkProject(field, p)
}

func (s *Server) checkProject(field, project string) error {
	if s.opts.Project != "" && project != s.opts.Project {
		return status.Errorf(codes.NotFound, "%s: project %q: this server serves project %q only (--pubsub-project)", field, project, s.opts.Project)
	}
	return nil
}

func topicName(project, id string) string { return "projects/" + project + "/topics/" + id }
func subName(project, id string) string   { return "projects/" + project + "/subscriptions/" + id }

// page returns the items of a sorted list of names after token, at most
// size of them (0: all), and the next page's token.
func page[T any](items []T, key func(T) string, size int32, token string) ([]T, string) {
	start := 0
	if token != "" {
		for start < len(items) && key(items[start]) <= token {
			start++
		}
	}
	items = items[start:]
	if size <= 0 || int(size) >= len(items) {
		return items, ""
	}
	items = items[:size]
	return items, key(items[len(items)-1])
}
