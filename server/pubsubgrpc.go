package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/weir-dev/weir/api"
	"github.com/weir-dev/weir/io/pubsub/pubsubgrpc"
)

// DefaultPubSubGRPCListen is the Pub/Sub gRPC API's address of `weir
// server` (the port of Google's Pub/Sub emulator).
const DefaultPubSubGRPCListen = "127.0.0.1:8085"

// checkPubSubGRPCConfig refuses a Pub/Sub gRPC address beyond loopback
// without both TLS and a token (emulator-mode clients send neither), and a
// half-given certificate.
func checkPubSubGRPCConfig(cfg Config) error {
	if cfg.PubSubGRPCListen == "" {
		return nil
	}
	if (cfg.PubSubGRPCTLSCert == "") != (cfg.PubSubGRPCTLSKey == "") {
		return fmt.Errorf("--pubsub-grpc-tls-cert and --pubsub-grpc-tls-key go together: give both")
	}
	loop, err := IsLoopback(cfg.PubSubGRPCListen)
	if err != nil {
		return fmt.Errorf("--pubsub-grpc-listen: %w", err)
	}
	token := cfg.AuthTokenFile != "" || cfg.GenerateAuthToken
	tlsGiven := cfg.PubSubGRPCTLSCert != "" || cfg.TLSCertFile != ""
	if !loop && (!tlsGiven || !token) {
		return fmt.Errorf("--pubsub-grpc-listen %s serves beyond loopback: that needs TLS (--tls-cert and --tls-key, or --pubsub-grpc-tls-cert and --pubsub-grpc-tls-key) "+
			"and a token (--auth-token-file or --generate-auth-token), since clients in emulator mode send neither; "+
			"or listen on 127.0.0.1 (see docs/PUBSUB.md): %w", cfg.PubSubGRPCListen, ErrAuthRequired)
	}
	return nil
}

// newPubSubAPI builds the Pub/Sub API's service, which the gRPC listener
// (servePubSubGRPC) and the REST surface under /v1/projects/ share (one
// state of ordering keys and streams).
func (p *Process) newPubSubAPI() error {
	limit := func(n int) int {
		if n == 0 {
			return api.DefaultMaxObjects
		}
		return n
	}
	opts := pubsubgrpc.Options{Project: p.cfg.PubSubProject, Auth: p.guard, Logger: p.log,
		MaxTopics: limit(p.cfg.MaxTopics), MaxSubscriptions: limit(p.cfg.MaxSubscriptions)}
	if p.cfg.PubSubGRPCTLSCert != "" {
		cert, err := tls.LoadX509KeyPair(p.cfg.PubSubGRPCTLSCert, p.cfg.PubSubGRPCTLSKey)
		if err != nil {
			return fmt.Errorf("--pubsub-grpc-tls-cert/--pubsub-grpc-tls-key: %w", err)
		}
		opts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	} else if p.certs != nil {
		// The API's certificate (--tls-cert), reloaded when it changes.
		cfg := p.certs.tlsConfig()
		cfg.NextProtos = []string{"h2"}
		opts.TLS = cfg
	}
	p.grpc = pubsubgrpc.New(p.broker, opts)
	return nil
}

// servePubSubGRPC listens on Config.PubSubGRPCListen and serves the Pub/Sub
// gRPC API there, behind the API's tokens. A busy port is a warning: the
// rest of the process serves on.
func (p *Process) servePubSubGRPC() error {
	if p.cfg.PubSubGRPCListen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", p.cfg.PubSubGRPCListen)
	if errors.Is(err, syscall.EADDRINUSE) {
		p.log.Warn("the Pub/Sub gRPC API is not served: its port is in use (another weir or a Pub/Sub emulator?); "+
			"choose another with --pubsub-grpc-listen, or turn it off with --pubsub-grpc-listen ''",
			"listen", p.cfg.PubSubGRPCListen, "error", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("--pubsub-grpc-listen %s: %w", p.cfg.PubSubGRPCListen, err)
	}
	p.grpcLn = ln
	go func() {
		if err := p.grpc.Serve(p.conns.wrap(ln)); err != nil {
			p.log.Error("the Pub/Sub gRPC API stopped", "error", err)
		}
	}()
	return nil
}

// PubSubGRPCAddress returns the host:port the Pub/Sub gRPC API serves on
// (PUBSUB_EMULATOR_HOST for Google's clients), "" when it is not served.
func (p *Process) PubSubGRPCAddress() string {
	if p.grpcLn == nil {
		return ""
	}
	return p.grpcLn.Addr().String()
}

// stopPubSubGRPC ends the gRPC calls before the broker stops.
func (p *Process) stopPubSubGRPC(ctx context.Context) {
	if p.grpc == nil {
		return
	}
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	p.grpc.Stop(gctx)
}
