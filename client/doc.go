// Package client is the Go client of a weir server's HTTP API and the wire
// types of every request and reply the API speaks: jobs and their
// summaries, metrics and metrics history, events, lineage history,
// snapshots, subscription snapshots, topics, subscriptions, compatibility
// reports, options and errors. A Go program that talks to a server imports
// this package only:
//
//	c, err := client.NewClient("http://127.0.0.1:7070", nil)
//	if err != nil { ... }
//	jobs, err := c.List(ctx, "active")
//
// The types mirror the JSON the server sends field for field (names,
// omitempty, null and empty lists); the server builds its replies from
// its own records and converts them to these types at its edge (package
// api), so this package links none of the server's machinery: no state
// store, broker, expression language or database driver.
//
// It may import errcode and the standard library.
package client
