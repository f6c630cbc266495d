package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// Topic is a topic as the API shows it.
type Topic struct {
	Name string `json:"name"`
	// Subject is the NATS subject external publishers write to.
	Subject string `json:"subject"`
	// Messages and Bytes are what the topic stores (within retention).
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	// FirstSeq and LastSeq are the sequences of the oldest and newest
	// stored messages.
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	// Retention is how long messages are kept, acknowledged or not (a Go
	// duration: "168h0m0s").
	Retention string `json:"retention"`
	// DuplicateWindow is how long message IDs are remembered: a message
	// published again with the same ID within it is stored once.
	DuplicateWindow string    `json:"duplicate_window"`
	Subscriptions   int       `json:"subscriptions"`
	CreateTime      time.Time `json:"create_time"`
}

// Subscription is a subscription as the API shows it.
type Subscription struct {
	Name  string `json:"name"`
	Topic string `json:"topic"`
	// NumPending counts the messages not yet delivered.
	NumPending uint64 `json:"num_pending"`
	// NumAckPending counts the messages delivered but not yet acknowledged.
	NumAckPending int `json:"num_ack_pending"`
	// Backlog is NumPending + NumAckPending: what is not yet acknowledged.
	Backlog uint64 `json:"backlog"`
	// AckFloor is the sequence up to which every message is acknowledged.
	AckFloor uint64 `json:"ack_floor"`
	// Delivered is the sequence of the last delivered message.
	Delivered uint64 `json:"delivered"`
	// AckWait is how long a delivered message may stay unacknowledged
	// before it is delivered again (a Go duration).
	AckWait    string    `json:"ack_wait"`
	CreateTime time.Time `json:"create_time"`
	// MadeBy is, for a subscription the job service made for a job (a
	// topic source's NAME--STEP, a replacement's own), the job it was made
	// for; absent for the user's own subscriptions.
	MadeBy *SubscriptionJob `json:"made_by,omitempty"`
	// ReadBy are the active jobs that read a service-made subscription.
	ReadBy []SubscriptionJob `json:"read_by,omitempty"`
	// Kept says why a service-made subscription is kept ("read by ...",
	// "the next job of NAME reads on from it ...", "a rollback of NAME
	// ... would re-read through it"), and KeepUntil until when when no
	// job reads it; a service-made subscription kept for nothing is
	// deleted by the server's next sweep.
	Kept      string     `json:"kept,omitempty"`
	KeepUntil *time.Time `json:"keep_until,omitempty"`
}

// SubscriptionJob is a job that made or reads a subscription.
type SubscriptionJob struct {
	JobID   string   `json:"job_id"`
	JobName string   `json:"job_name"`
	State   JobState `json:"state"`
	// Step is the job's step that reads it (MadeBy only).
	Step string `json:"step,omitempty"`
}

// CreateTopicRequest is the body of POST /v1/topics.
type CreateTopicRequest struct {
	Name string `json:"name"`
	// Retention is how long the topic keeps messages, a Go duration
	// ("168h", "30m"). Default "" means 7 days.
	Retention string `json:"retention,omitempty"`
}

// BrokerInfo is the reply to GET /v1/broker: the identity of the server's
// Pub/Sub broker, a UUID made at its first start and kept with its data.
// A job snapshot records it beside its topic positions (SnapshotBroker),
// which mean something only on that broker.
type BrokerInfo struct {
	ID string `json:"id"`
}

// TopicList is the reply to GET /v1/topics.
type TopicList struct {
	Topics []Topic `json:"topics"`
}

// PublishMessage is one message of a publish request.
type PublishMessage struct {
	// Data is the payload: a JSON string is published as its text, any
	// other JSON value (an object, typically) as its compact JSON encoding.
	Data json.RawMessage `json:"data"`
	// Attributes travel with the message (names may not start with Nats-).
	Attributes map[string]string `json:"attributes,omitempty"`
	// ID, when set, de-duplicates: a message with an ID the topic stored
	// within its duplicate window is not stored again.
	ID string `json:"id,omitempty"`
}

// PublishRequest is the body of POST /v1/topics/{name}:publish.
type PublishRequest struct {
	Messages []PublishMessage `json:"messages"`
}

// PublishResult says where one published message was stored.
type PublishResult struct {
	// Sequence is the message's sequence in the topic (the earlier
	// message's when Duplicate).
	Sequence uint64 `json:"sequence"`
	// Duplicate reports that the ID was already stored within the
	// duplicate window: nothing new was stored.
	Duplicate bool `json:"duplicate"`
	// IDConflict reports a Duplicate whose data differs from the stored
	// message's: the ID was reused for other content, which
	// was dropped.
	IDConflict bool `json:"id_conflict,omitempty"`
}

// PublishResponse is the reply to a publish request, one result per
// message in request order.
type PublishResponse struct {
	// Published counts the messages stored, duplicates excluded.
	Published  int `json:"published"`
	Duplicates int `json:"duplicates"`
	// IDConflicts counts the duplicates whose content differed from the
	// stored message of their ID (PublishResult.IDConflict).
	IDConflicts int             `json:"id_conflicts"`
	Results     []PublishResult `json:"results"`
}

// CreateSubscriptionRequest is the body of POST /v1/subscriptions.
type CreateSubscriptionRequest struct {
	Name  string `json:"name"`
	Topic string `json:"topic"`
	// AckWait is how long a delivered message may stay unacknowledged
	// before it is delivered again, a Go duration. Default "" means 60s.
	AckWait string `json:"ack_wait,omitempty"`
	// FromBeginning delivers every message the topic still retains;
	// default false: only messages published after the creation.
	FromBeginning bool `json:"from_beginning,omitempty"`
}

// SubscriptionList is the reply to GET /v1/subscriptions.
type SubscriptionList struct {
	Subscriptions []Subscription `json:"subscriptions"`
}

// PullRequest is the body of POST /v1/subscriptions/{name}:pull.
type PullRequest struct {
	// Max is the most messages returned (1 to MaxPull; default 1). Pull
	// returns what is available now, without waiting for more.
	Max int `json:"max,omitempty"`
	// Ack acknowledges the returned messages (cumulatively: every earlier
	// message of the subscription too). Default false: they are delivered
	// again after the subscription's ack wait.
	Ack bool `json:"ack,omitempty"`
	// Force acknowledges even when a running job reads the subscription
	// (taking messages from it); without it such a pull with Ack answers
	// 409 SUBSCRIPTION_IN_USE.
	Force bool `json:"force,omitempty"`
}

// MaxPull is the most messages one pull request returns.
const MaxPull = 10000

// PulledMessage is a message read from a subscription.
type PulledMessage struct {
	// Data is the payload when it is valid UTF-8 (JSON lines are);
	// otherwise it is empty and DataBase64 holds the payload.
	Data       string            `json:"data"`
	DataBase64 string            `json:"data_base64,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
	// ID is the message ID it was published with, if any.
	ID          string    `json:"id,omitempty"`
	Sequence    uint64    `json:"sequence"`
	PublishTime time.Time `json:"publish_time"`
	// NumDelivered counts the deliveries to this subscription, this one
	// included.
	NumDelivered uint64 `json:"num_delivered"`
}

// PullResponse is the reply to a pull request.
type PullResponse struct {
	Messages []PulledMessage `json:"messages"`
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

// Broker returns the identity of the server's Pub/Sub broker.
func (c *Client) Broker(ctx context.Context) (*BrokerInfo, error) {
	var out BrokerInfo
	if err := c.do(ctx, http.MethodGet, "/v1/broker", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
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
