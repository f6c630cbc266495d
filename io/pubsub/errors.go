package pubsub

import (
	"errors"
	"fmt"

	"github.com/weir-dev/weir/runner/contract"
)

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
	// It is contract.ErrInputGone for whoever reads a source's failure
	// without knowing the broker.
	ErrSubscriptionNotFound = contract.ErrSubscriptionNotFound
	// ErrSubscriptionExists: CreateSubscription found a subscription of that
	// name, possibly on another topic. Use it, or choose another name.
	ErrSubscriptionExists = errors.New("subscription already exists")
	// ErrBrokerClosed: the broker was shut down. Start or connect a new one.
	ErrBrokerClosed = errors.New("broker is shut down")
	// ErrUnavailable: the NATS server could not be reached or did not answer
	// in time. Retry later, or check --nats-url and that JetStream is enabled.
	// It is contract.ErrUnavailable for whoever reads a job's failure
	// without knowing the broker: a job service runs the job again.
	ErrUnavailable error = mayPass("broker unavailable")
	// ErrAuthRefused: the external NATS server refused weir's credentials
	// (--nats-creds, --nats-nkey, --nats-user or the URL's user). Check
	// them against the server's configuration; retrying cannot help.
	ErrAuthRefused = errors.New("credentials refused")
	// ErrInvalidConfig: a source or sink configuration cannot work. Fix the
	// pipeline; retrying cannot help.
	ErrInvalidConfig = errors.New("invalid configuration")
	// ErrMessageTooLarge: a published message (data, attributes and ID) is
	// larger than the broker accepts. Split it, or raise the NATS server's
	// max_payload.
	ErrMessageTooLarge = errors.New("message too large")
	// ErrStorageFull: the broker refused a write for lack of storage: its
	// limit is reached or the disk is full. Free space: a limit that
	// follows the disk (Options.MaxStore 0, the default) rises on its own
	// once space returns (within Options.DiskCheckInterval), and an
	// embedded broker whose write met a full disk brings its storage back
	// by itself (within Options.RecoverInterval; see CheckStorage).
	// It is contract.ErrUnavailable, as ErrUnavailable is.
	ErrStorageFull error = mayPass("broker storage full")
	// ErrInUse: a topic or subscription that a running job reads or writes
	// cannot be deleted (or a job's subscription drained by hand) without
	// force.
	ErrInUse = errors.New("in use by a running job")
	// ErrInvalidPosition: a checkpointed position cannot be decoded or
	// belongs to another subscription. The checkpoint is not for this
	// source; start without it or fix the pipeline's subscription.
	ErrInvalidPosition = errors.New("invalid source position")
	// ErrPositionBeyondTopic: a checkpointed position is after the newest
	// message of its topic: the position is another broker's, or the topic
	// was deleted and created again since. Start from it with a
	// translation of its positions (by publish time, earliest or latest).
	// It is contract.ErrForeignPosition for whoever reads it without
	// knowing the broker.
	ErrPositionBeyondTopic = fmt.Errorf("source position beyond the topic's messages: %w", contract.ErrForeignPosition)
	// ErrSnapshotNotFound: no subscription snapshot has this name (or it
	// expired). Check the name; list the snapshots.
	ErrSnapshotNotFound = contract.ErrSnapshotNotFound
	// ErrSnapshotExists: a subscription snapshot of this name exists. Choose
	// another name, or delete the old snapshot first.
	ErrSnapshotExists = errors.New("subscription snapshot already exists")
	// ErrSnapshotExpiresTooSoon: the snapshot would live less than
	// MinSnapshotLifetime (its oldest unacknowledged message is too old).
	// Acknowledge or seek past the old messages first.
	ErrSnapshotExpiresTooSoon = errors.New("subscription snapshot would expire too soon")
	// ErrSnapshotTooLarge: the subscription has more runs of messages
	// acknowledged out of order above its acknowledgement floor than a
	// snapshot holds (MaxSnapshotAckedRuns). Acknowledge (or seek past) the
	// oldest unacknowledged messages first, so the floor moves up.
	ErrSnapshotTooLarge = errors.New("subscription snapshot too large")
	// ErrSnapshotTopicMismatch: a seek to a snapshot of another topic's
	// subscription. Seek to a snapshot of the same topic.
	ErrSnapshotTopicMismatch = errors.New("snapshot belongs to another topic")
	// ErrPerMessageSubscription: a pipeline was given a subscription that
	// acknowledges each message on its own (created through the Pub/Sub
	// gRPC API); pipelines acknowledge cumulatively. Read the topic instead.
	ErrPerMessageSubscription = errors.New("subscription acknowledges per message")
)

// mayPass is a broker error that may pass by itself (ErrUnavailable,
// ErrStorageFull): it matches itself and contract.ErrUnavailable.
type mayPass string

func (e mayPass) Error() string { return string(e) }

// Is reports whether target is contract.ErrUnavailable (errors.Is matches
// the same error by equality first).
func (e mayPass) Is(target error) bool { return target == contract.ErrUnavailable }
