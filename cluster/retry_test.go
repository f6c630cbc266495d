package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestRetryJS: Join's JetStream requests are sent again while they go
// unanswered or JetStream is unavailable (a NATS server restarting, its
// cluster electing a meta leader), and not after any other error or once
// the caller's context is done.
func TestRetryJS(t *testing.T) {
	unavailable := &jetstream.APIError{Code: 503, ErrorCode: jetstream.JSErrCodeJetStreamNotEnabled, Description: "jetstream not enabled"}
	for _, tc := range []struct {
		name      string
		errs      []error // the answers of the attempts before the success
		wantCalls int
		wantErr   bool
	}{
		{name: "answered at once", wantCalls: 1},
		{name: "unanswered twice", errs: []error{context.DeadlineExceeded, fmt.Errorf("creating: %w", nats.ErrTimeout)}, wantCalls: 3},
		{name: "no responders, then 503", errs: []error{nats.ErrNoResponders, unavailable}, wantCalls: 3},
		{name: "another error", errs: []error{errors.New("stream name already in use with a different configuration")}, wantCalls: 1, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			v, err := retryJS(context.Background(), func(ctx context.Context) (int, error) {
				if _, ok := ctx.Deadline(); !ok {
					t.Error("an attempt without a deadline")
				}
				calls++
				if calls <= len(tc.errs) {
					return 0, tc.errs[calls-1]
				}
				return 7, nil
			})
			if calls != tc.wantCalls || (err != nil) != tc.wantErr || (!tc.wantErr && v != 7) {
				t.Errorf("%d calls, %v, %v; want %d calls, error %v", calls, v, err, tc.wantCalls, tc.wantErr)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	calls := 0
	_, err := retryJS(ctx, func(context.Context) (int, error) { calls++; return 0, nats.ErrNoResponders })
	if !errors.Is(err, nats.ErrNoResponders) || calls < 1 || calls > 3 {
		t.Errorf("with the caller's context ending: %d calls, %v", calls, err)
	}
}
