package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir/service"
)

// DefaultServer is the address the CLI talks to when neither --server nor
// WEIR_SERVER says otherwise.
const DefaultServer = "http://127.0.0.1:7070"

// ErrUnreachable is returned when no weir server answers at the client's
// address: start one (`weir server`) or point the client at it.
var ErrUnreachable = errors.New("weir server unreachable")

// Error is an error reply of the API: its HTTP status, stable code and message.
type Error struct {
	Status  int
	Code    errcode.Code
	Message string
}

// Error returns the server's message.
func (e *Error) Error() string { return e.Message }

// Client calls a weir server's API.
type Client struct {
	base  string
	http  *http.Client
	token string // sent as Authorization: Bearer when not ""
}

// WithToken returns a copy of c that sends token as its bearer token
// (Authorization: Bearer TOKEN) with every request.
func (c *Client) WithToken(token string) *Client {
	cc := *c
	cc.token = token
	return &cc
}

// NewClient returns a client of the server at addr (http://host:port, or
// host:port). hc nil means a client with a 30s timeout.
func NewClient(addr string, hc *http.Client) (*Client, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("server address %q is not an http(s)://host:port URL", addr)
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{base: strings.TrimRight(u.String(), "/"), http: hc}, nil
}

// Base returns the server's base URL.
func (c *Client) Base() string { return c.base }

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	status, b, err := c.roundTrip(ctx, method, path, in)
	if err != nil {
		return err
	}
	if status >= 300 {
		return replyError(method, path, status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("decoding the reply of %s %s: %w", method, path, err)
		}
	}
	return nil
}

// doWithReply is do for requests whose refusals carry a reply as well (the
// report of an update or a release): on an error status it returns the
// *Error, and replied says whether the body also decoded into out.
func (c *Client) doWithReply(ctx context.Context, method, path string, in, out any) (replied bool, err error) {
	status, b, err := c.roundTrip(ctx, method, path, in)
	if err != nil {
		return false, err
	}
	if status >= 300 {
		return json.Unmarshal(b, out) == nil, replyError(method, path, status, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return false, fmt.Errorf("decoding the reply of %s %s: %w", method, path, err)
	}
	return true, nil
}

// roundTrip sends in (JSON, unless nil) and returns the reply's status and body.
func (c *Client) roundTrip(ctx context.Context, method, path string, in any) (int, []byte, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, fmt.Errorf("encoding the request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, nil, fmt.Errorf("building the request: %w", err)
	}
	switch {
	case in != nil, method == http.MethodPost, method == http.MethodPut, method == http.MethodPatch, method == http.MethodDelete:
		// A state-changing request is JSON even without a body (the
		// server refuses any other: see docs/SECURITY.md).
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, ctx.Err()
		}
		if terr := tlsError(c.base, err); terr != nil {
			return 0, nil, terr
		}
		return 0, nil, fmt.Errorf("%w at %s: %v", ErrUnreachable, c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("reading the reply of %s %s: %w", method, path, err)
	}
	return resp.StatusCode, b, nil
}

// replyError is the *Error of a reply with an error status: the code and
// message of its error body, or INTERNAL with the body when it has none.
func replyError(method, path string, status int, b []byte) *Error {
	var eb ErrorBody
	if err := json.Unmarshal(b, &eb); err != nil || eb.Error.Code == "" {
		return &Error{Status: status, Code: errcode.Internal, Message: fmt.Sprintf("%s %s: HTTP %d: %s", method, path, status, strings.TrimSpace(string(b)))}
	}
	return &Error{Status: status, Code: eb.Error.Code, Message: eb.Error.Message}
}

// Submit creates a job.
func (c *Client) Submit(ctx context.Context, req SubmitRequest) (*SubmitResponse, error) {
	var out SubmitResponse
	if err := c.do(ctx, http.MethodPost, "/v1/jobs", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// List returns the jobs matching status ("active", "terminated", "all").
func (c *Client) List(ctx context.Context, status string) ([]service.Summary, error) {
	var out JobList
	if err := c.do(ctx, http.MethodGet, "/v1/jobs?status="+url.QueryEscape(status), nil, &out); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

// Get returns the job with ID or name ref, with live metrics while it runs.
func (c *Client) Get(ctx context.Context, ref string) (*service.Job, error) {
	var out service.Job
	if err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(ref), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Drain asks the job ref to drain.
func (c *Client) Drain(ctx context.Context, ref string) (*service.Summary, error) {
	return c.action(ctx, ref, "drain")
}

// Cancel asks the job ref to cancel.
func (c *Client) Cancel(ctx context.Context, ref string) (*service.Summary, error) {
	return c.action(ctx, ref, "cancel")
}

func (c *Client) action(ctx context.Context, ref, action string) (*service.Summary, error) {
	var out service.Summary
	if err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(ref)+":"+action, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Healthy returns nil when the server answers its health check.
func (c *Client) Healthy(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil)
}

// CreateTopic creates a topic.
func (c *Client) CreateTopic(ctx context.Context, req CreateTopicRequest) (*Topic, error) {
	var out Topic
	if err := c.do(ctx, http.MethodPost, "/v1/topics", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListTopics returns every topic (dead-letter topics included), by name.
func (c *Client) ListTopics(ctx context.Context) ([]Topic, error) {
	var out TopicList
	if err := c.do(ctx, http.MethodGet, "/v1/topics", nil, &out); err != nil {
		return nil, err
	}
	return out.Topics, nil
}

// GetTopic describes the topic name.
func (c *Client) GetTopic(ctx context.Context, name string) (*Topic, error) {
	var out Topic
	if err := c.do(ctx, http.MethodGet, "/v1/topics/"+url.PathEscape(name), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteOption changes how a delete request treats what it would break.
type DeleteOption func(*deleteOptions)

type deleteOptions struct{ force bool }

// Force deletes a topic or subscription even when an active job uses it
// (without it the server answers 409 TOPIC_IN_USE or SUBSCRIPTION_IN_USE).
func Force() DeleteOption { return func(o *deleteOptions) { o.force = true } }

func deleteQuery(opts []DeleteOption) string {
	var o deleteOptions
	for _, f := range opts {
		f(&o)
	}
	if o.force {
		return "?force=true"
	}
	return ""
}

// DeleteTopic deletes the topic name with its messages and subscriptions.
// It is refused (TOPIC_IN_USE) while an active job uses the topic, unless
// Force is given.
func (c *Client) DeleteTopic(ctx context.Context, name string, opts ...DeleteOption) error {
	return c.do(ctx, http.MethodDelete, "/v1/topics/"+url.PathEscape(name)+deleteQuery(opts), nil, nil)
}

// Publish publishes msgs to topic, in order. Keep a request under
// MaxRequestBytes: send large inputs in several calls.
func (c *Client) Publish(ctx context.Context, topic string, msgs []PublishMessage) (*PublishResponse, error) {
	var out PublishResponse
	if err := c.do(ctx, http.MethodPost, "/v1/topics/"+url.PathEscape(topic)+":publish", PublishRequest{Messages: msgs}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateSubscription creates a subscription.
func (c *Client) CreateSubscription(ctx context.Context, req CreateSubscriptionRequest) (*Subscription, error) {
	var out Subscription
	if err := c.do(ctx, http.MethodPost, "/v1/subscriptions", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListSubscriptions returns the subscriptions of topic, or of every topic
// when topic is "", by name.
func (c *Client) ListSubscriptions(ctx context.Context, topic string) ([]Subscription, error) {
	path := "/v1/subscriptions"
	if topic != "" {
		path += "?topic=" + url.QueryEscape(topic)
	}
	var out SubscriptionList
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return out.Subscriptions, nil
}

// GetSubscription describes the subscription name.
func (c *Client) GetSubscription(ctx context.Context, name string) (*Subscription, error) {
	var out Subscription
	if err := c.do(ctx, http.MethodGet, "/v1/subscriptions/"+url.PathEscape(name), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSubscription deletes the subscription name; its topic keeps its
// messages.
// It is refused (SUBSCRIPTION_IN_USE) while an active job reads it, unless
// Force is given.
func (c *Client) DeleteSubscription(ctx context.Context, name string, opts ...DeleteOption) error {
	return c.do(ctx, http.MethodDelete, "/v1/subscriptions/"+url.PathEscape(name)+deleteQuery(opts), nil, nil)
}

// Pull returns up to req.Max messages available now from the subscription
// name, acknowledging them when req.Ack.
func (c *Client) Pull(ctx context.Context, name string, req PullRequest) ([]PulledMessage, error) {
	var out PullResponse
	if err := c.do(ctx, http.MethodPost, "/v1/subscriptions/"+url.PathEscape(name)+":pull", req, &out); err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// ErrTLS marks a failed TLS handshake with the server: its certificate is
// not trusted (give its CA with --tls-ca or $WEIR_TLS_CA), or one side does
// not speak TLS (check the address's scheme).
var ErrTLS = errors.New("TLS handshake with the weir server failed")

// tlsError words err when it is a TLS failure, nil otherwise.
func tlsError(base string, err error) error {
	var verr *tls.CertificateVerificationError
	var rerr tls.RecordHeaderError
	switch {
	case errors.As(err, &verr):
		return fmt.Errorf("%w: the certificate of %s is not trusted (%v); give the CA that signed it with --tls-ca or $%s", ErrTLS, base, verr.Err, TLSCAEnv)
	case errors.As(err, &rerr):
		return fmt.Errorf("%w: %s does not answer TLS; if it serves plain HTTP, use an http:// address", ErrTLS, base)
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Errorf("%w: %s serves plain HTTP; use an http:// address", ErrTLS, base)
	}
	return nil
}

// TLSCAEnv is the environment variable clients read their private CA file
// from when --tls-ca is not given.
const TLSCAEnv = "WEIR_TLS_CA"

// NewHTTPClient returns the HTTP client of a weir API client: timeout
// bounds each request (0: none); caFile, when not "", holds the PEM
// certificates of the only authorities trusted for https addresses (a
// private CA), else the system's roots are. Certificates are always
// verified, and TLS 1.2 is the oldest version offered.
func NewHTTPClient(caFile string, timeout time.Duration) (*http.Client, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("reading the CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	return &http.Client{Timeout: timeout, Transport: tr}, nil
}

// ClientCAFile returns the CA file a client trusts: caFile (--tls-ca),
// else $WEIR_TLS_CA; "" trusts the system's roots.
func ClientCAFile(caFile string) string {
	if caFile != "" {
		return caFile
	}
	return strings.TrimSpace(os.Getenv(TLSCAEnv))
}
