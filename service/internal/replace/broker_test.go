package replace

import "github.com/weir-dev/weir/io/pubsub"

// The server hands the flows its Pub/Sub broker as an interface value; the
// flows find what they need of it by type assertion. These declarations
// keep the broker implementing every such interface.
var (
	_ parallelBroker      = (*pubsub.Broker)(nil)
	_ handoverBroker      = (*pubsub.Broker)(nil)
	_ subscriptionDeleter = (*pubsub.Broker)(nil)
)
