package pubsubgrpc

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestHandlerPanicAnswersInternal: a call whose handler panics answers
// INTERNAL naming the method, instead of ending the process.
func TestHandlerPanicAnswersInternal(t *testing.T) {
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	const method = "/google.pubsub.v1.Publisher/Publish"
	tests := []struct {
		name string
		call func() error
	}{
		{name: "unary", call: func() error {
			_, err := s.unaryRecover(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: method},
				func(context.Context, any) (any, error) {
					var m map[string]int
					m["x"] = 1 // a nil map: a runtime panic
					return nil, nil
				})
			return err
		}},
		{name: "stream", call: func() error {
			return s.streamRecover(nil, nil, &grpc.StreamServerInfo{FullMethod: method},
				func(any, grpc.ServerStream) error { panic("broken") })
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), method) {
				t.Fatalf("error %v, want INTERNAL naming %s", err, method)
			}
		})
	}
}
