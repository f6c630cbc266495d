package pubsub

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/weir-dev/weir/runner/contract"
)

// TestErrorsThatMayPass: the broker's errors that may pass by themselves
// (it cannot be reached, it is out of storage) are contract.ErrUnavailable
// for a job service that does not know the broker, so that it starts the
// job again rather than fail it; the others are not, and every error still
// matches only itself among the broker's.
func TestErrorsThatMayPass(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		mayPass  bool
		sentinel error
	}{
		{name: "timeout", err: apiErr("opening subscription s", nats.ErrTimeout), mayPass: true, sentinel: ErrUnavailable},
		{name: "deadline", err: apiErr("opening subscription s", context.DeadlineExceeded), mayPass: true, sentinel: ErrUnavailable},
		{name: "reconnecting", err: apiErr("reading subscription s", nats.ErrConnectionReconnecting), mayPass: true, sentinel: ErrUnavailable},
		{name: "storage full", err: fmt.Errorf("creating subscription s: %w", ErrStorageFull), mayPass: true, sentinel: ErrStorageFull},
		{name: "subscription deleted", err: fmt.Errorf("reading: %w", ErrSubscriptionNotFound), sentinel: ErrSubscriptionNotFound},
		{name: "closed", err: apiErr("reading subscription s", nats.ErrConnectionClosed), sentinel: ErrBrokerClosed},
		{name: "invalid position", err: fmt.Errorf("resuming: %w", ErrInvalidPosition), sentinel: ErrInvalidPosition},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := errors.Is(tc.err, contract.ErrUnavailable); got != tc.mayPass {
				t.Errorf("errors.Is(%v, contract.ErrUnavailable) = %v, want %v", tc.err, got, tc.mayPass)
			}
			if !errors.Is(tc.err, tc.sentinel) {
				t.Errorf("%v does not match %v", tc.err, tc.sentinel)
			}
			for _, other := range []error{ErrUnavailable, ErrStorageFull} {
				if other != tc.sentinel && errors.Is(tc.err, other) {
					t.Errorf("%v matches %v too", tc.err, other)
				}
			}
		})
	}
}
