// Package pubsubrest serves Google's Pub/Sub v1 REST surface — the JSON
// paths /v1/projects/{project}/topics/{topic}:publish,
// /v1/projects/{project}/subscriptions/{subscription}:pull and the others —
// over the same service as the gRPC API (io/pubsub/pubsubgrpc), so that curl
// users and REST-only clients publish to and pull from weir's topics.
// Bodies are the v1 messages in the proto3 JSON mapping (camelCase fields,
// data in base64), as Google documents them; errors are Google's JSON error
// {"error": {"code", "message", "status"}}.
//
// Routes (PUT creates, as in Pub/Sub):
//
//	GET    /v1/projects/{p}/topics                       ListTopics
//	PUT    /v1/projects/{p}/topics/{t}                   CreateTopic
//	GET    /v1/projects/{p}/topics/{t}                   GetTopic
//	PATCH  /v1/projects/{p}/topics/{t}                   UpdateTopic
//	DELETE /v1/projects/{p}/topics/{t}                   DeleteTopic
//	POST   /v1/projects/{p}/topics/{t}:publish           Publish
//	GET    /v1/projects/{p}/topics/{t}/subscriptions     ListTopicSubscriptions
//	GET    /v1/projects/{p}/topics/{t}/snapshots         ListTopicSnapshots
//	GET    /v1/projects/{p}/subscriptions                ListSubscriptions
//	PUT    /v1/projects/{p}/subscriptions/{s}            CreateSubscription
//	GET    /v1/projects/{p}/subscriptions/{s}            GetSubscription
//	PATCH  /v1/projects/{p}/subscriptions/{s}            UpdateSubscription
//	DELETE /v1/projects/{p}/subscriptions/{s}            DeleteSubscription
//	POST   /v1/projects/{p}/subscriptions/{s}:pull                Pull
//	POST   /v1/projects/{p}/subscriptions/{s}:acknowledge         Acknowledge
//	POST   /v1/projects/{p}/subscriptions/{s}:modifyAckDeadline   ModifyAckDeadline
//	POST   /v1/projects/{p}/subscriptions/{s}:seek                Seek
//	POST   /v1/projects/{p}/subscriptions/{s}:detach              DetachSubscription
//	GET    /v1/projects/{p}/snapshots                    ListSnapshots
//	PUT    /v1/projects/{p}/snapshots/{n}                CreateSnapshot
//	GET    /v1/projects/{p}/snapshots/{n}                GetSnapshot
//	PATCH  /v1/projects/{p}/snapshots/{n}                UpdateSnapshot
//	DELETE /v1/projects/{p}/snapshots/{n}                DeleteSnapshot
//
// It may import cloud.google.com/go/pubsub/v2 (for the generated
// apiv1/pubsubpb protos), google.golang.org/grpc (status codes),
// google.golang.org/protobuf (the JSON mapping) and the standard library.
// It knows nothing of the broker: the service it calls does.
package pubsubrest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Prefix is the path prefix of every route: weir's own API has no route
// under it.
const Prefix = "/v1/projects/"

// MaxBodyBytes bounds a request body: a publish of Pub/Sub's 10 MB of data
// in base64, with its JSON.
const MaxBodyBytes = 16 << 20

// Service is the Pub/Sub service the routes call: *pubsubgrpc.Server.
type Service interface {
	pubsubpb.PublisherServer
	pubsubpb.SubscriberServer
}

// Handler serves the REST routes over a Service.
type Handler struct {
	svc Service
	log *slog.Logger
}

// New returns the REST handler of svc; logger may be nil.
func New(svc Service, logger *slog.Logger) *Handler {
	if logger == nil {
		logger = slog.Default()
	}
	return &Handler{svc: svc, log: logger.With("component", "pubsub-rest")}
}

// Mount returns a handler that serves the paths under Prefix with rest and
// every other path with next.
func Mount(next http.Handler, rest *Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, Prefix) {
			rest.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// route is a parsed path: the resource's full name (projects/p/kind/id),
// its kind, the custom method after ':' and a sub-collection.
type route struct {
	project, kind, name, method, sub string
}

// parse reads /v1/projects/{p}[/{kind}[/{id}[:{method}|/{sub}]]].
func parse(path string) (route, error) {
	rest := strings.TrimPrefix(path, "/v1/")
	parts := strings.Split(rest, "/")
	if len(parts) < 3 || parts[0] != "projects" || parts[1] == "" {
		return route{}, fmt.Errorf("path %s: want /v1/projects/{project}/topics, subscriptions or snapshots", path)
	}
	rt := route{project: parts[1], kind: parts[2]}
	switch rt.kind {
	case "topics", "subscriptions", "snapshots":
	default:
		return route{}, fmt.Errorf("path %s: %q is not a Pub/Sub collection (topics, subscriptions, snapshots)", path, rt.kind)
	}
	if len(parts) == 3 {
		return rt, nil
	}
	id := parts[3]
	if i := strings.LastIndexByte(id, ':'); i >= 0 {
		id, rt.method = id[:i], id[i+1:]
	}
	if id == "" {
		return route{}, fmt.Errorf("path %s: empty ID", path)
	}
	rt.name = "projects/" + rt.project + "/" + rt.kind + "/" + id
	switch {
	case len(parts) == 4:
	case len(parts) == 5 && rt.method == "" && rt.kind == "topics" && (parts[4] == "subscriptions" || parts[4] == "snapshots"):
		rt.sub = parts[4]
	default:
		return route{}, fmt.Errorf("path %s is not a Pub/Sub REST route", path)
	}
	return rt, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, err := parse(r.URL.Path)
	if err != nil {
		writeError(w, status.Error(codes.NotFound, err.Error()))
		return
	}
	resp, err := h.call(r.Context(), r, rt)
	if err != nil {
		h.log.Debug("Pub/Sub REST call failed", "method", r.Method, "path", r.URL.Path, "error", err)
		writeError(w, err)
		return
	}
	b, err := protojson.MarshalOptions{}.Marshal(resp)
	if err != nil {
		writeError(w, status.Errorf(codes.Internal, "encoding the response: %v", err))
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_, _ = w.Write(b)
}

// call runs the route's method.
func (h *Handler) call(ctx context.Context, r *http.Request, rt route) (proto.Message, error) {
	q := r.URL.Query()
	size, _ := strconv.Atoi(q.Get("pageSize"))
	token := q.Get("pageToken")
	project := "projects/" + rt.project
	key := r.Method + " " + rt.kind
	if rt.name == "" {
		key += " list"
	} else if rt.method != "" {
		key += " :" + rt.method
	} else if rt.sub != "" {
		key += " /" + rt.sub
	}
	switch key {
	case "GET topics list":
		return h.svc.ListTopics(ctx, &pubsubpb.ListTopicsRequest{Project: project, PageSize: int32(size), PageToken: token})
	case "PUT topics":
		t := &pubsubpb.Topic{}
		if err := decode(r, t); err != nil {
			return nil, err
		}
		t.Name = rt.name
		return h.svc.CreateTopic(ctx, t)
	case "GET topics":
		return h.svc.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: rt.name})
	case "PATCH topics":
		req := &pubsubpb.UpdateTopicRequest{}
		if err := decode(r, req); err != nil {
			return nil, err
		}
		if req.Topic == nil {
			req.Topic = &pubsubpb.Topic{}
		}
		req.Topic.Name = rt.name
		return h.svc.UpdateTopic(ctx, req)
	case "DELETE topics":
		return h.svc.DeleteTopic(ctx, &pubsubpb.DeleteTopicRequest{Topic: rt.name})
	case "POST topics :publish":
		req := &pubsubpb.PublishRequest{}
		if err := decode(r, req); err != nil {
			return nil, err
		}
		req.Topic = rt.name
		return h.svc.Publish(ctx, req)
	case "GET topics /subscriptions":
		return h.svc.ListTopicSubscriptions(ctx, &pubsubpb.ListTopicSubscriptionsRequest{Topic: rt.name, PageSize: int32(size), PageToken: token})
	case "GET topics /snapshots":
		return h.svc.ListTopicSnapshots(ctx, &pubsubpb.ListTopicSnapshotsRequest{Topic: rt.name, PageSize: int32(size), PageToken: token})
	case "GET subscriptions list":
		return h.svc.ListSubscriptions(ctx, &pubsubpb.ListSubscriptionsRequest{Project: project, PageSize: int32(size), PageToken: token})
	case "PUT subscriptions":
		s := &pubsubpb.Subscription{}
		if err := decode(r, s); err != nil {
			return nil, err
		}
		s.Name = rt.name
		return h.svc.CreateSubscription(ctx, s)
	case "GET subscriptions":
		return h.svc.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: rt.name})
	case "PATCH subscriptions":
		req := &pubsubpb.UpdateSubscriptionRequest{}
		if err := decode(r, req); err != nil {
			return nil, err
		}
		if req.Subscription == nil {
			req.Subscription = &pubsubpb.Subscription{}
		}
		req.Subscription.Name = rt.name
		return h.svc.UpdateSubscription(ctx, req)
	case "DELETE subscriptions":
		return h.svc.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: rt.name})
	case "POST subscriptions :pull":
		req := &pubsubpb.PullRequest{}
		if err := decode(r, req); err != nil {
			return nil, err
		}
		req.Subscription = rt.name
		return h.svc.Pull(ctx, req)
	case "POST subscriptions :acknowledge":
		req := &pubsubpb.AcknowledgeRequest{}
		if err := decode(r, req); err != nil {
			return nil, err
		}
		req.Subscription = rt.name
		return h.svc.Acknowledge(ctx, req)
	case "POST subscriptions :modifyAckDeadline":
		req := &pubsubpb.ModifyAckDeadlineRequest{}
		if err := decode(r, req); err != nil {
			return nil, err
		}
		req.Subscription = rt.name
		return h.svc.ModifyAckDeadline(ctx, req)
	case "POST subscriptions :seek":
		req := &pubsubpb.SeekRequest{}
		if err := decode(r, req); err != nil {
			return nil, err
		}
		req.Subscription = rt.name
		return h.svc.Seek(ctx, req)
	case "POST subscriptions :detach":
		return h.svc.DetachSubscription(ctx, &pubsubpb.DetachSubscriptionRequest{Subscription: rt.name})
	case "GET snapshots list":
		return h.svc.ListSnapshots(ctx, &pubsubpb.ListSnapshotsRequest{Project: project, PageSize: int32(size), PageToken: token})
	case "PUT snapshots":
		req := &pubsubpb.CreateSnapshotRequest{}
		if err := decode(r, req); err != nil {
			return nil, err
		}
		req.Name = rt.name
		return h.svc.CreateSnapshot(ctx, req)
	case "GET snapshots":
		return h.svc.GetSnapshot(ctx, &pubsubpb.GetSnapshotRequest{Snapshot: rt.name})
	case "PATCH snapshots":
		req := &pubsubpb.UpdateSnapshotRequest{}
		if err := decode(r, req); err != nil {
			return nil, err
		}
		if req.Snapshot == nil {
			req.Snapshot = &pubsubpb.Snapshot{}
		}
		req.Snapshot.Name = rt.name
		return h.svc.UpdateSnapshot(ctx, req)
	case "DELETE snapshots":
		return h.svc.DeleteSnapshot(ctx, &pubsubpb.DeleteSnapshotRequest{Snapshot: rt.name})
	}
	if rt.method != "" {
		return nil, status.Errorf(codes.NotFound, "%s %s: no method %q on %s (see docs/PUBSUB.md for the REST routes)", r.Method, r.URL.Path, rt.method, rt.kind)
	}
	return nil, status.Errorf(codes.Unimplemented, "%s %s: method %s is not a Pub/Sub REST call here (see docs/PUBSUB.md for the REST routes)", r.Method, r.URL.Path, r.Method)
}

// decode reads the request's JSON body (empty: the zero message) into m,
// in the proto3 JSON mapping; unknown fields are refused, naming them.
func decode(r *http.Request, m proto.Message) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "reading the request body: %v", err)
	}
	if len(b) > MaxBodyBytes {
		return status.Errorf(codes.InvalidArgument, "the request body is larger than %d bytes", MaxBodyBytes)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	if err := protojson.Unmarshal(b, m); err != nil {
		return status.Errorf(codes.InvalidArgument, "the request body is not a %s in JSON: %v", m.ProtoReflect().Descriptor().Name(), err)
	}
	return nil
}

// httpStatus maps gRPC codes to HTTP statuses as Google's APIs do.
var httpStatus = map[codes.Code]int{
	codes.OK: http.StatusOK, codes.Canceled: 499, codes.Unknown: http.StatusInternalServerError,
	codes.InvalidArgument: http.StatusBadRequest, codes.DeadlineExceeded: http.StatusGatewayTimeout,
	codes.NotFound: http.StatusNotFound, codes.AlreadyExists: http.StatusConflict,
	codes.PermissionDenied: http.StatusForbidden, codes.ResourceExhausted: http.StatusTooManyRequests,
	codes.FailedPrecondition: http.StatusBadRequest, codes.Aborted: http.StatusConflict,
	codes.OutOfRange: http.StatusBadRequest, codes.Unimplemented: http.StatusNotImplemented,
	codes.Internal: http.StatusInternalServerError, codes.Unavailable: http.StatusServiceUnavailable,
	codes.DataLoss: http.StatusInternalServerError, codes.Unauthenticated: http.StatusUnauthorized,
}

// writeError writes err as Google's JSON error.
func writeError(w http.ResponseWriter, err error) {
	st, ok := status.FromError(err)
	if !ok {
		if errors.Is(err, context.Canceled) {
			st = status.New(codes.Canceled, err.Error())
		} else {
			st = status.New(codes.Internal, err.Error())
		}
	}
	code := httpStatus[st.Code()]
	if code == 0 {
		code = http.StatusInternalServerError
	}
	body := map[string]any{"error": map[string]any{"code": code, "message": st.Message(), "status": grpcStatusName(st.Code())}}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// grpcStatusName is the code's name as Google's JSON errors spell it
// (NOT_FOUND).
func grpcStatusName(c codes.Code) string {
	var b strings.Builder
	for i, r := range c.String() {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}
