package rewind

import "github.com/weir-dev/weir/io/pubsub"

// The server hands the flows its Pub/Sub broker as an interface value;
// this keeps the broker implementing Rewinder.
var _ Rewinder = (*pubsub.Broker)(nil)
