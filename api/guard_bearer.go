package api

import "time"

// CheckBearer authenticates a request that does not come through Wrap (the
// Pub/Sub gRPC listener): ok reports that token is one of the token file's
// (always true when the guard asks for no token); a positive wait means
// client failed too often and must wait that long, the token unchecked.
// A failure counts towards client's limit and is logged, as in Wrap.
func (g *Guard) CheckBearer(client, token, what string) (ok bool, wait time.Duration) {
	if g.tokens == nil {
		return true, 0
	}
	if wait := g.failures.wait(client); wait > 0 {
		return false, wait
	}
	if token != "" && g.tokens.accepts(token) {
		return true, 0
	}
	reason := "no bearer token"
	if token != "" {
		reason = "wrong bearer token"
	}
	g.failures.take(client)
	g.log.Warn("authentication failed", "client", client, "call", what, "reason", reason)
	return false, 0
}
