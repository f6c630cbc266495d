package api

import "time"

// CheckBearer authenticates a request that does not come through Wrap (the
// Pub/Sub gRPC listener): ok reports that token is one of the token file's
// (always true when the guard asks for no token), whatever the failures
// of client; a failing attempt counts towards client's limit and is
// logged, as in Wrap, and a positive wait means client failed too often
// and must wait that long.
func (g *Guard) CheckBearer(client, token, what string) (ok bool, wait time.Duration) {
	if g.tokens == nil {
		return true, 0
	}
	if token != "" && g.tokens.accepts(token) {
		return true, 0
	}
	reason := "no bearer token"
	if token != "" {
		reason = "wrong bearer token"
	}
	if wait := g.failures.take(client); wait > 0 {
		return false, wait
	}
	g.log.Warn("authentication failed", "client", client, "call", what, "reason", reason)
	return false, 0
}
