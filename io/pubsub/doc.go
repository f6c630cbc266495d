// Package pubsub is weir's embedded Pub/Sub, built on NATS JetStream: topics
// (durable logs), subscriptions (durable cursors with acknowledgements), the
// ReadFromPubSub source and the WriteToPubSub sink of pipelines, and the
// per-job dead-letter topic.
//
// # Broker
//
// A Broker is a connection to JetStream: StartEmbedded runs an in-process
// nats-server with a file store under Options.StoreDir (the default, nothing
// to install), Connect dials an external NATS server (--nats-url). Every
// method of a Broker is safe for concurrent use; Shutdown drains and stops.
// An embedded broker whose write met a full disk refuses publishes with
// ErrStorageFull and, every Options.RecoverInterval, brings its JetStream
// back once the disk has room (recover.go), without a restart.
//
// # Names
//
// A topic name is 1 to 200 characters from [A-Za-z0-9_.~+%-], starting
// with a letter or digit (the characters of Pub/Sub's IDs: NATS names
// cannot hold '.', so it is ',' in stream and consumer names and subject
// tokens, see NATSName; key-value keys cannot hold '~', '+' and '%', so
// they are escaped there, see namedKV). Topic T is the stream WEIR_TOPIC_T on the subject
// weir.topic.T. The dead-letter topic of job J is named weir.deadletter.J
// (DeadLetterTopic), the stream WEIR_DEADLETTER_J on the subject
// weir.deadletter.J; it accepts every topic operation.
//
// A subscription name follows the same rule as a topic name and is unique
// across topics. Subscription S of topic T is the durable pull consumer S on
// the stream of T, with cumulative acknowledgements (AckAll): acknowledging
// stream sequence N acknowledges every earlier message of the subscription.
// A subscription therefore has one reader at a time — a pipeline source, or a
// person pulling — and two readers of one subscription can acknowledge each
// other's messages. Give each job lineage its own subscription.
//
// Topics keep messages by age (Retention, 7 days by default) whether or not
// they were acknowledged, so that subscriptions can later seek back; the
// stream's duplicate window (DuplicateWindow, 10 minutes by default) drops a
// message whose Nats-Msg-Id was already stored within the window.
//
// # Delivery and acknowledgements
//
// The source never acknowledges on read: the runner calls Ack with a
// position once a checkpoint covering it is durable. Messages that are read
// but not acknowledged (cancel, crash) stay in the subscription: the source
// rewinds the subscription to the checkpointed position when it starts
// (Resume) or to the acknowledgement floor (Split), and any other reader gets
// them again after the subscription's AckWait. A delivery that never
// reaches the source (a pull request the client gave up on while the broker
// still answered it) shows as a skip in the consumer's delivery sequence
// together with one in the topic's: the source then rewinds the
// subscription to its acknowledgement floor and reads the lost messages in
// order, instead of dropping their later redelivery as a repeat of what it
// emitted while a cumulative acknowledgement covered them unread.
//
// # Subscription snapshots and seek
//
// A subscription snapshot (CreateSubscriptionSnapshot, Pub/Sub's) records a
// subscription's acknowledgement floor and, for a per-message subscription,
// the messages acknowledged above it (see acked.go); Seek sets a subscription's state to
// a snapshot's of the same topic, or to a time. Snapshots live in the
// key-value bucket WEIR_SUBSCRIPTION_SNAPSHOTS for 7 days less the age of
// their oldest unacknowledged message, bounded by the topic's retention
// (see seek.go); deleting a topic deletes its subscriptions' snapshots.
//
// It may import row, runner/contract, mtime, window, io/avrorow and
// github.com/hamba/avro/v2 (format avro's payloads),
// github.com/nats-io/nats-server/v2 and github.com/nats-io/nats.go (the
// NATS server and client) and the standard library. It knows nothing of YAML, HTTP or the job store,
// and must not import runner (the executor).
package pubsub
