package bench

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// nexmarkYAMLSteps are the Nexmark queries written in YAML, the steps that
// follow a `type: Nexmark` source named Events; each ends in a step named
// Out. ${size} and ${period} stand for the windows' size and period
// (Beam's windowSizeSec and windowPeriodSec; q11's session gap is the
// size, as in Beam). A windowed query's results carry their window
// (window_start, window_end).
//
// Beam's queries as YAML writes them: q3 joins the sellers in OR, ID and
// CA with their category-10 auctions in the global window (so it runs
// bounded only: without a trigger its join fires at the end of input);
// q5 counts each auction's bids per sliding window, takes the highest
// count per window (a Combine without group_by) and joins the counts back
// to it; q7 joins each fixed window's bids to the window's highest price;
// q8 joins the people who joined in a fixed window with the auctions they
// opened in it; q11 counts each bidder's bids per session; q12 counts each
// bidder's bids per pane of a processing-time trigger in the global
// window; q9 picks each auction's winning bid with SQL over the auctions
// joined with their bids in the global window (nexmarkYAMLWinners); q6
// averages each seller's last ten winning prices in close order with an
// SQL window (ROWS BETWEEN 9 PRECEDING AND CURRENT ROW), and q4 averages
// them per category in sliding windows of their auctions' close computed
// in the same query; both read only the prices
// (nexmarkYAMLWinningPrices). (A WindowInto cannot do q4's windows: after a join in
// the global window, at the end of input, the winning bids moved back to
// their close time are late for every window, and Beam drops them too.)
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
	"q3": `
    - type: Filter
      name: SellerStates
      input: Events
      config: {keep: "eventType == 'PERSON' && newPerson.state in ['OR', 'ID', 'CA']"}
    - type: MapToFields
      name: Sellers
      input: SellerStates
      config:
        fields: {id: newPerson.id, name: newPerson.name, city: newPerson.city, state: newPerson.state}
    - type: Filter
      name: Category10
      input: Events
      config: {keep: "eventType == 'AUCTION' && newAuction.category == 10"}
    - type: MapToFields
      name: Auctions
      input: Category10
      config:
        fields: {id: newAuction.id, seller: newAuction.seller}
    - type: Join
      name: Out
      input: {auction: Auctions, person: Sellers}
      config:
        type: inner
        equalities: [{auction: seller, person: id}]
        fields: {person: [name, city, state], auction: [id]}
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
        windowing: {type: sliding, size: ${size}, period: ${period}}
    - type: Combine
      name: Counts
      input: Sliding
      config:
        group_by: [auction]
        combine:
          num: {value: auction, fn: count}
    - type: Combine
      name: MaxCount
      input: Counts
      config:
        group_by: []
        combine:
          maxNum: {value: num, fn: max}
    - type: Join
      name: Out
      input: {counts: Counts, best: MaxCount}
      config:
        type: inner
        equalities: [{counts: num, best: maxNum}]
        fields: {counts: [auction, num, window_start, window_end], best: []}
`,
	"q7": `
    - type: Filter
      name: Bids
      input: Events
      config: {keep: "eventType == 'BID'"}
    - type: MapToFields
      name: Flat
      input: Bids
      config:
        fields: {auction: bid.auction, bidder: bid.bidder, price: bid.price, dateTime: bid.dateTime, extra: bid.extra}
    - type: WindowInto
      name: Fixed
      input: Flat
      config:
        windowing: {type: fixed, size: ${size}}
    - type: Combine
      name: MaxPrice
      input: Fixed
      config:
        group_by: []
        combine:
          maxPrice: {value: price, fn: max}
    - type: Join
      name: Out
      input: {bids: Fixed, best: MaxPrice}
      config:
        type: inner
        equalities: [{bids: price, best: maxPrice}]
        fields: {bids: [auction, bidder, price, dateTime, extra], best: [window_start, window_end]}
`,
	"q8": `
    - type: WindowInto
      name: Fixed
      input: Events
      config:
        windowing: {type: fixed, size: ${size}}
    - type: Filter
      name: NewPersons
      input: Fixed
      config: {keep: "eventType == 'PERSON'"}
    - type: MapToFields
      name: People
      input: NewPersons
      config:
        fields: {id: newPerson.id, name: newPerson.name}
    - type: Filter
      name: NewAuctions
      input: Fixed
      config: {keep: "eventType == 'AUCTION'"}
    - type: MapToFields
      name: Sellers
      input: NewAuctions
      config:
        fields: {seller: newAuction.seller, reserve: newAuction.reserve}
    - type: Join
      name: Joined
      input: {person: People, auction: Sellers}
      config:
        type: inner
        equalities: [{person: id, auction: seller}]
        fields: {person: [id, name], auction: [reserve]}
    - type: MapToFields
      name: Out
      input: Joined
      config:
        fields: {id: id, name: name, reserve: reserve, window_start: window_start, window_end: window_end}
`,
	"q6": nexmarkYAMLWinningPricesSQL("Out", `SELECT seller, sum(price) OVER last10 / count(*) OVER last10 AS price FROM winners
          WINDOW last10 AS (PARTITION BY seller ORDER BY expires, id ROWS BETWEEN 9 PRECEDING AND CURRENT ROW)`),
	"q9": nexmarkYAMLWinningBidsSQL("Out", "SELECT * FROM winners"),
	// q4 computes the sliding windows of the winning bids' close times in
	// the query (SQLite has no HOP): each window start from the latest
	// period boundary at or before the close back while the window still
	// holds it, as a sliding WindowInto assigns them. The window's pane is
	// the global window's last, at the end of input.
	"q4": nexmarkYAMLWinningPricesSQL("Means", `,
          closes AS (SELECT category, price, CAST(round(unixepoch(expires, 'subsec') * 1000) AS INTEGER) - 1 AS t FROM winners),
          hops(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM hops WHERE k + 1 < (${size_ms} + ${period_ms} - 1) / ${period_ms}),
          windowed AS (SELECT category, price, t - t % ${period_ms} - k * ${period_ms} AS start FROM closes, hops
            WHERE t - t % ${period_ms} - k * ${period_ms} > t - ${size_ms})
          SELECT category, (2 * sum(price) + count(*)) / (2 * count(*)) AS price,
            strftime('%Y-%m-%dT%H:%M:%fZ', start / 1000.0, 'unixepoch') AS window_start,
            strftime('%Y-%m-%dT%H:%M:%fZ', (start + ${size_ms}) / 1000.0, 'unixepoch') AS window_end
          FROM windowed GROUP BY category, start`) + `
    - type: ExtractWindowingInfo
      name: Panes
      input: Means
      config:
        fields: [pane_info]
    - type: MapToFields
      name: Out
      input: Panes
      config:
        fields: {category: category, price: price, isLast: pane_info.is_last, window_start: window_start, window_end: window_end}
`,
	"q11": `
    - type: Filter
      name: Bids
      input: Events
      config: {keep: "eventType == 'BID'"}
    - type: MapToFields
      name: Bidders
      input: Bids
      config:
        fields: {personId: bid.bidder}
    - type: WindowInto
      name: Sessions
      input: Bidders
      config:
        windowing: {type: sessions, gap: ${size}}
    - type: Combine
      name: Out
      input: Sessions
      config:
        group_by: [personId]
        combine:
          bidsPerSession: {value: personId, fn: count}
`,
	"q12": `
    - type: Filter
      name: Bids
      input: Events
      config: {keep: "eventType == 'BID'"}
    - type: MapToFields
      name: Bidders
      input: Bids
      config:
        fields: {bidder: bid.bidder}
    - type: WindowInto
      name: ProcessingTime
      input: Bidders
      config:
        windowing:
          type: global
          trigger: {type: repeatedly, trigger: {type: after_processing_time, delay: ${size}}}
          accumulation_mode: discarding
    - type: Combine
      name: Out
      input: ProcessingTime
      config:
        group_by: [bidder]
        combine:
          bidCount: {value: bidder, fn: count}
`,
}

// nexmarkYAMLBoundedOnly are the YAML queries the unbounded runs leave
// out: q3, q4, q6 and q9 emit nothing before the end of input, and q12's
// results carry the global window's end as their time, so no latency can
// be measured.
var nexmarkYAMLBoundedOnly = map[string]bool{"q3": true, "q4": true, "q6": true, "q9": true, "q12": true}

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

// NexmarkYAMLStreamingQueries returns the names of the Nexmark queries
// written in YAML that emit results while their input is unbounded,
// sorted.
func NexmarkYAMLStreamingQueries() []string {
	var qs []string
	for _, q := range NexmarkYAMLQueries() {
		if !nexmarkYAMLBoundedOnly[q] {
			qs = append(qs, q)
		}
	}
	return qs
}

// NexmarkYAMLSteps returns the YAML steps of query q (those that follow a
// `type: Nexmark` source named Events and end in a step named Out), with
// sliding windows of size and period where the query has them; ok is
// false when q has no YAML version.
func NexmarkYAMLSteps(q string, size, period time.Duration) (steps string, ok bool) {
	steps, ok = nexmarkYAMLSteps[q]
	if ok {
		steps = strings.NewReplacer("${size}", size.String(), "${period}", period.String(),
			"${size_ms}", strconv.FormatInt(size.Milliseconds(), 10), "${period_ms}", strconv.FormatInt(period.Milliseconds(), 10)).Replace(steps)
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

// nexmarkYAMLAuctionsAndBids are the steps of Beam's WinningBids in YAML
// before its SQL: the auctions (Auctions) and the bids (Bids) as flat rows
// of the fields given (MapToFields' fields, indented for them).
func nexmarkYAMLAuctionsAndBids(auctionFields, bidFields string) string {
	return `
    - type: Filter
      name: AuctionEvents
      input: Events
      config: {keep: "eventType == 'AUCTION'"}
    - type: MapToFields
      name: Auctions
      input: AuctionEvents
      config:
        fields:` + auctionFields + `
    - type: Filter
      name: BidEvents
      input: Events
      config: {keep: "eventType == 'BID'"}
    - type: MapToFields
      name: Bids
      input: BidEvents
      config:
        fields: ` + bidFields + "\n"
}

// The fields of the auctions and bids the winning bids are taken from:
// every one, or (for the queries that read only the winning prices) those
// a winning price needs and those q4 and q6 read, a third of the bytes
// for the SQL step to load (a bid's padding is most of it).
const (
	nexmarkYAMLAuctionFields = `
          id: newAuction.id
          itemName: newAuction.itemName
          description: newAuction.description
          initialBid: newAuction.initialBid
          reserve: newAuction.reserve
          dateTime: newAuction.dateTime
          expires: newAuction.expires
          seller: newAuction.seller
          category: newAuction.category
          extra: newAuction.extra`
	nexmarkYAMLBidFields          = `{auction: bid.auction, bidder: bid.bidder, price: bid.price, dateTime: bid.dateTime, extra: bid.extra}`
	nexmarkYAMLAuctionPriceFields = `
          id: newAuction.id
          reserve: newAuction.reserve
          expires: newAuction.expires
          seller: newAuction.seller
          category: newAuction.category`
	nexmarkYAMLBidPriceFields = `{auction: bid.auction, price: bid.price, dateTime: bid.dateTime}`
)

// nexmarkYAMLWinners is Beam's WinningBids in SQL over the tables auction
// and bid: every auction joined with its bids made before it expires at
// no less than its reserve, the best of them (the highest price, then the
// earliest, then the lowest bidder and padding, as the Go query's
// BetterBid) picked by row_number. Beam's query gets the bids up to each
// auction's expiry from a window per auction, which YAML's windows cannot
// express; the SQL joins in the global window instead, so the queries that
// use it emit at the end of input (bounded runs only).
const nexmarkYAMLWinners = `SELECT id, itemName, description, initialBid, reserve, dateTime, expires, seller, category, extra,
            bidder, price, bidDateTime, bidExtra
          FROM (SELECT a.*, b.bidder, b.price, b.dateTime AS bidDateTime, b.extra AS bidExtra,
              row_number() OVER (PARTITION BY a.id ORDER BY b.price DESC, b.dateTime, b.bidder, b.extra) AS rank
            FROM auction a JOIN bid b ON b.auction = a.id
            WHERE b.dateTime < a.expires AND b.price >= a.reserve)
          WHERE rank = 1`

// nexmarkYAMLWinningPrices is the table winners for the queries that read
// only a winning bid's price (q4, q6): each auction with the highest price
// of its bids made before it expires at no less than its reserve. Which
// bid of that price won (nexmarkYAMLWinners' tie-break) does not change
// the price, so an aggregate per auction does, without ranking every bid.
const nexmarkYAMLWinningPrices = `SELECT a.id AS id, a.seller AS seller, a.category AS category, a.expires AS expires, max(b.price) AS price
            FROM auction a JOIN bid b ON b.auction = a.id
            WHERE b.dateTime < a.expires AND b.price >= a.reserve
            GROUP BY a.id`

// nexmarkYAMLWinningPricesSQL is nexmarkYAMLWinningBidsSQL for the queries
// that read only the winning prices (nexmarkYAMLWinningPrices).
func nexmarkYAMLWinningPricesSQL(name, query string) string {
	return nexmarkYAMLAuctionsAndBids(nexmarkYAMLAuctionPriceFields, nexmarkYAMLBidPriceFields) +
		nexmarkYAMLWinnersSQL(name, nexmarkYAMLWinningPrices, query)
}

// nexmarkYAMLWinningBidsSQL is a Sql step named name over Auctions and
// Bids (nexmarkYAMLAuctionsAndBids) running query, in which the table
// winners holds the winning bids (nexmarkYAMLWinners).
func nexmarkYAMLWinningBidsSQL(name, query string) string {
	return nexmarkYAMLAuctionsAndBids(nexmarkYAMLAuctionFields, nexmarkYAMLBidFields) +
		nexmarkYAMLWinnersSQL(name, nexmarkYAMLWinners, query)
}

// nexmarkYAMLWinnersSQL is a Sql step named name over Auctions and Bids
// running query, in which the table winners is what the query winners
// selects.
func nexmarkYAMLWinnersSQL(name, winners, query string) string {
	return `
    - type: Sql
      name: ` + name + `
      input: {auction: Auctions, bid: Bids}
      config:
        query: >-
          WITH winners AS (` + winners + `)
          ` + query + "\n"
}
