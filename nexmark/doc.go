// Package nexmark is the Nexmark benchmark for weir: the event types
// (Person, Auction, Bid), a generator faithful to Beam's Nexmark
// GeneratorConfig (proportions 1:3:46, first ids 1000, first category 10,
// hot auction, seller and bidder ratios, in-flight auctions and active
// people, out-of-order groups, event times from the configured rate),
// deterministic by seed and splittable across workers with disjoint ids;
// the source that reads it in a pipeline; and queries q0 to q9, q11 and q12 written with
// the Go SDK.
//
// It may import weir, internal/box, mtime, runner/contract, window and the
// standard library.
package nexmark
