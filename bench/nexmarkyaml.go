package bench

import (
	"fmt"
	"sort"
	"time"
)

// nexmarkYAMLSteps are the Nexmark queries written in YAML, the steps that
// follow a `type: Nexmark` source named Events; each ends in a step named
// Out. q5 is the counting stage of Beam's query 5 (hot items): the bids
// per auction in each sliding window, without the final pick of the
// auctions with the most bids (%s and %s are the window's size and
// period).
var nexmarkYAMLSteps = map[string]string{
	"q0": `
    - type: MapToFields
      name: Out
      input: Events
      config:
        fields: {eventType: eventType, newPerson: newPerson, newAuction: newAuction, bid: bid}
`,
	"q1": `
    - type: Filter
      name: Bids
      input: Events
      config: {keep: "eventType == 'BID'"}
    - type: MapToFields
      name: Out
      input: Bids
      config:
        fields: {auction: bid.auction, bidder: bid.bidder, price: bid.price * 89 / 100, dateTime: bid.dateTime, extra: bid.extra}
`,
	"q2": `
    - type: Filter
      name: Select
      input: Events
      config: {keep: "eventType == 'BID' && bid.auction % 123 == 0"}
    - type: MapToFields
      name: Out
      input: Select
      config:
        fields: {auction: bid.auction, price: bid.price}
`,
	"q5": `
    - type: Filter
      name: Bids
      input: Events
      config: {keep: "eventType == 'BID'"}
    - type: MapToFields
      name: Auctions
      input: Bids
      config:
        fields: {auction: bid.auction}
    - type: WindowInto
      name: Sliding
      input: Auctions
      config:
        windowing: {type: sliding, size: %s, period: %s}
    - type: Combine
      name: Out
      input: Sliding
      config:
        group_by: [auction]
        combine:
          bids: {value: auction, fn: count}
`,
}

// NexmarkYAMLQueries returns the names of the Nexmark queries written in
// YAML, sorted.
func NexmarkYAMLQueries() []string {
	qs := make([]string, 0, len(nexmarkYAMLSteps))
	for q := range nexmarkYAMLSteps {
		qs = append(qs, q)
	}
	sort.Strings(qs)
	return qs
}

// NexmarkYAMLSteps returns the YAML steps of query q (those that follow a
// `type: Nexmark` source named Events and end in a step named Out), with
// sliding windows of size and period where the query has them; ok is
// false when q has no YAML version.
func NexmarkYAMLSteps(q string, size, period time.Duration) (steps string, ok bool) {
	steps, ok = nexmarkYAMLSteps[q]
	if ok && q == "q5" {
		steps = fmt.Sprintf(steps, size, period)
	}
	return steps, ok
}

// NexmarkYAMLPipeline is query q written in YAML after a Nexmark source
// whose config is the flow mapping sourceConfig ("{numEvents: 1000}").
func NexmarkYAMLPipeline(q, sourceConfig string, size, period time.Duration) (string, error) {
	steps, ok := NexmarkYAMLSteps(q, size, period)
	if !ok {
		return "", fmt.Errorf("no YAML version of Nexmark query %q (have %v)", q, NexmarkYAMLQueries())
	}
	return "pipeline:\n  transforms:\n    - type: Nexmark\n      name: Events\n      config: " + sourceConfig + "\n" + steps, nil
}
