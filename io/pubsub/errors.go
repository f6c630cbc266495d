package pubsub

import "errors"

// Errors returned by the broker. Match them with errors.Is: the returned
// errors wrap them with the name concerned.
var (
	// ErrInvalidName: a topic or subscription name breaks the naming rule
	// (see the package documentation). Fix the name; retrying cannot help.
	ErrInvalidName = errors.New("invalid name")
	// ErrTopicNotFound: the topic does not exist. Create it first
	// (CreateTopic), or check the name.
	ErrTopicNotFound = errors.New("topic not found")
	// ErrTopicExists: CreateTopic found a topic of that name. Use it as it
	// is, or delete it first if its settings must change.
	ErrTopicExists = errors.New("topic already exists")
	// ErrSubscriptionNotFound: the subscription does not exist. Create it
	// (CreateSubscription), or check the name.
	ErrSubscriptionNotFound = errors.New("subscription not found")
	// ErrSubscriptionExists: CreateSubscription found a subscription of that
	// name, possibly on another topic. Use it, or choose another name.
	ErrSubscriptionExists = errors.New("subscription already exists")
	// ErrBrokerClosed: the broker was shut down. Start or connect a new one.
	ErrBrokerClosed = errors.New("broker is shut down")
	// ErrUnavailable: the NATS server could not be reached or did not answer
	// in time. Retry later, or check --nats-url and that JetStream is enabled.
	ErrUnavailable = errors.New("broker unavailable")
	// ErrInvalidConfig: a source or sink configuration cannot work. Fix the
	// pipeline; retrying cannot help.
	ErrInvalidConfig = errors.New("invalid configuration")
	// ErrInvalidPosition: a checkpointed position cannot be decoded or
	// belongs to another subscription. The checkpoint is not for this
	// source; start without it or fix the pipeline's subscription.
	ErrInvalidPosition = errors.New("invalid source position")
	// ErrPerMessageSubscription: a pipeline was given a subscription that
	// acknowledges each message on its own (created through the Pub/Sub
	// gRPC API); pipelines acknowledge cumulatively. Read the topic instead.
	ErrPerMessageSubscription = errors.New("subscription acknowledges per message")
)
