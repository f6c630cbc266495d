// Package pubsubgrpc serves Google's Pub/Sub v1 gRPC API (the Publisher and
// Subscriber services of google.pubsub.v1) over weir's broker, so that
// Google's client libraries, pointed at weir with PUBSUB_EMULATOR_HOST,
// publish to and pull from the same topics and subscriptions weir jobs read
// and write.
//
// # Names
//
// A topic is projects/{project}/topics/{topic} and a subscription
// projects/{project}/subscriptions/{subscription}. weir has one namespace:
// every project ID names the same topics, unless Options.Project restricts
// the server to one (other projects are NOT_FOUND). Topic and subscription
// IDs follow weir's name rule (pubsub.ValidateName); one outside it is
// INVALID_ARGUMENT with the rule. Dead-letter topics are
// projects/{project}/topics/weir.deadletter.{job}.
//
// # Messages
//
// message_id is the message's stream sequence in its topic (decimal),
// publish_time the time the broker stored it, attributes its NATS headers
// (but the reserved Nats-* ones). The ordering key travels as the attribute
// goog_ordering_key (OrderingKeyAttribute; Pub/Sub reserves attribute names
// starting with goog, so no client attribute collides): a weir job sees it
// as that attribute and sets it the same way.
//
// # Acknowledgements
//
// Subscriptions created through this API acknowledge each message on its
// own, with the subscription's ack deadline and redelivery after it
// (pubsub.SubscriptionConfig.PerMessageAck); ModifyAckDeadline sets a
// message's deadline from now (0: redeliver at once). weir jobs
// acknowledge cumulatively at checkpoints, so the two do not share a
// subscription: a pipeline refuses a per-message subscription, and this API
// refuses to pull from or acknowledge on a cumulative one (a job's, or one
// created with weir's HTTP API) with FAILED_PRECONDITION naming the job.
// Both read the same topics, each through its own subscription.
//
// Snapshots (CreateSnapshot, Seek to a snapshot) record a subscription's
// acknowledgement floor and the messages acknowledged one by one above it
// (see pubsub.Broker.StartRecordAcks, which Acknowledge and StreamingPull
// call), in weir's one subscription snapshot store; deliveries skip, and
// acknowledge, what a seek to a snapshot restored as acknowledged
// (pubsub.Broker.AckRestored). An ack ID carries the generation of the
// subscription's deliveries it was fetched in (pubsub.Broker.AckGeneration,
// after a '#'): acknowledgements and deadline changes of a generation
// before the last seek are ignored.
//
// It may import io/pubsub, cloud.google.com/go/pubsub/v2 (for the
// generated apiv1/pubsubpb protos), google.golang.org/genproto/googleapis/rpc
// (the ErrorInfo of exactly-once acknowledgements), google.golang.org/grpc,
// google.golang.org/protobuf, github.com/nats-io/nats.go (the JetStream
// consumers behind subscriptions) and the standard library. It knows
// nothing of the job service or HTTP.
package pubsubgrpc
