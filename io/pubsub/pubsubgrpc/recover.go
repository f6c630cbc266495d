package pubsubgrpc

import (
	"context"
	"fmt"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A call whose handler panics answers INTERNAL, and the server goes on:
// grpc-go, unlike net/http, does not recover a handler's panic, so without
// these interceptors one malformed request the code did not expect would
// take the whole process down, with every job it runs.

// unaryRecover answers INTERNAL for a unary call whose handler panicked.
func (s *Server) unaryRecover(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, s.panicked(info.FullMethod, p)
		}
	}()
	return h(ctx, req)
}

// streamRecover answers INTERNAL for a streaming call whose handler
// panicked.
func (s *Server) streamRecover(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = s.panicked(info.FullMethod, p)
		}
	}()
	return h(srv, ss)
}

// panicked logs the panic p of a call to method, with its stack, and
// returns the call's INTERNAL status.
func (s *Server) panicked(method string, p any) error {
	s.log.Error("a Pub/Sub call panicked", "method", method, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	return status.Errorf(codes.Internal, "the server failed on this request (%s): internal error: %v; the log holds the details", method, p)
}
