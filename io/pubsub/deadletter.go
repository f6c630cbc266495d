package pubsub

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// DeadLetterTopic returns the name of job's dead-letter topic,
// weir.deadletter.<job name>: where a server job sends the failing elements
// of steps without error_handling. It is a topic like any other (subscribe
// to it to inspect or replay rejects); PublishReject creates it on demand.
func DeadLetterTopic(jobName string) string { return deadLetterPrefix + jobName }

// PublishReject publishes rj to job's dead-letter topic, creating the topic
// if needed, as the JSON object {element, error: {step, reason, message},
// source: {source, offset}}. A non-empty msgID de-duplicates replays (use
// the reject's source position, e.g. RejectID). It returns the message's
// stream sequence.
func (b *Broker) PublishReject(ctx context.Context, jobName string, rj contract.Reject, msgID string) (uint64, error) {
	topic := DeadLetterTopic(jobName)
	data := row.AppendJSON(nil, row.FromReject(rj))
	// No retries: a missing topic is the expected first-time case.
	res, err := b.publish(ctx, topic, data, nil, msgID, jetstream.WithRetryAttempts(0))
	if err == nil {
		return res.Sequence, nil
	}
	if !errors.Is(err, ErrTopicNotFound) {
		return 0, fmt.Errorf("publishing a reject of step %s to the dead-letter topic: %w", rj.Step, err)
	}
	if _, cerr := b.EnsureTopic(ctx, topic, TopicConfig{}); cerr != nil {
		return 0, fmt.Errorf("creating the dead-letter topic of job %s: %w", jobName, cerr)
	}
	res, err = b.Publish(ctx, topic, data, nil, msgID)
	if err != nil {
		return 0, fmt.Errorf("publishing a reject of step %s to the dead-letter topic: %w", rj.Step, err)
	}
	return res.Sequence, nil
}

// RejectID returns a message ID for a reject that is the same when a replay
// rejects the same element again: step, reason and source position. It is
// empty when the reject has no source position and no Key (a stored
// state value's). A too_late reject's ID names its window too.
func RejectID(rj contract.Reject) string {
	if rj.Source == nil {
		if rj.Key == "" {
			return ""
		}
		return rj.Step + "/" + rj.Reason + "/" + rj.Key
	}
	id := rj.Step + "/" + rj.Reason + "/" + rj.Source.Source + "/" + strconv.FormatInt(rj.Source.Offset, 10)
	if rj.Late != nil {
		// One element can be too late for several (sliding) windows.
		id += "/" + strconv.FormatInt(int64(rj.Late.Window.Start), 10) + "-" + strconv.FormatInt(int64(rj.Late.Window.End), 10)
	}
	return id
}
