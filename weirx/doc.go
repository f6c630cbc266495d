// Package weirx runs a Go program's pipeline as a durable job, like Beam's
// beamx: the program's functions live in its binary, so the program embeds
// the job service (package server: the same data directory, checkpoints,
// HTTP API and broker as `weir server`) and gets weir's command-line flags.
//
//	func main() {
//		weirx.Main(func(p *weir.Pipeline) error {
//			s := p.Root()
//			events := weir.Generate(s, "Events", weir.GenerateConfig{Rate: 1000}, makeEvent)
//			...
//			return nil
//		})
//	}
//
// Run it with --job-name NAME [--data-dir DIR] [--listen ADDR]; a new build
// started with --update takes the job over from the running process after
// the compatibility check, opening its state in place (see Run and the
// README's "Go SDK programs"). `weir jobs ... --server http://ADDR` manages
// the job. The API's protections are weir server's (--auth-token-file,
// --generate-auth-token, --auth-exempt, --allowed-hosts), and a build started
// with --update authenticates its release call with --token, --token-file,
// $WEIR_TOKEN, its --auth-token-file or DATA_DIR/auth-token (see
// docs/SECURITY.md). Like weir server, a program serves Google's Pub/Sub
// gRPC API on --pubsub-grpc-listen (default 127.0.0.1:8085; a busy port is
// a warning), limited to --pubsub-project when set (docs/PUBSUB.md).
//
// It may import weir (the SDK root package), server, service, service/record, client (to
// ask a running build to release the data directory), compat, errcode,
// io/sqlsink, io/pubsub (ReadFromPubSub, WriteToPubSub), runner/contract,
// row, sandbox (the parsing of --rehearse-trace-memory and the check of
// --rehearse-trace-dir), github.com/spf13/pflag and the standard library; nothing
// in weir imports it (user programs do).
package weirx
