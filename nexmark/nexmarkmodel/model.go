// Package nexmarkmodel computes each Nexmark query's expected output from
// the generated events with plain loops and maps, independently of the SDK,
// YAML and the runner (as Beam's QueryNModel classes do). The tests of the
// Go queries and of the YAML ones compare their output with these models,
// as sorted multisets of strings: a result is rendered with %+v of its Go
// type, and a windowed one starts with its window (WindowKey).
//
// It may import nexmark, mtime and the standard library (testing: Compare
// fails a test).
package nexmarkmodel

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/nexmark"
)

// NumEvents is how many events the tests' bounded runs generate.
const NumEvents = 100_000

// Events returns the events a bounded source of cfg gives, with
// their times.
func Events(cfg nexmark.Config) ([]nexmark.Event, []mtime.Time, error) {
	g, err := nexmark.NewGenerator(cfg, nexmark.BaseTime)
	if err != nil {
		return nil, nil, err
	}
	evs := make([]nexmark.Event, cfg.NumEvents)
	ts := make([]mtime.Time, cfg.NumEvents)
	for i := range evs {
		evs[i], ts[i] = g.Event(int64(i))
	}
	return evs, ts, nil
}

// Q0 (passthrough) is every event, described by DescribeEvent.
func Q0(evs []nexmark.Event, _ []mtime.Time, _ nexmark.Config) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = DescribeEvent(e)
	}
	return out
}

// DescribeEvent renders an event as "person {...}", "auction {...}" or
// "bid {...}".
func DescribeEvent(e nexmark.Event) string {
	switch {
	case e.Person != nil:
		return fmt.Sprintf("person %+v", *e.Person)
	case e.Auction != nil:
		return fmt.Sprintf("auction %+v", *e.Auction)
	}
	return fmt.Sprintf("bid %+v", *e.Bid)
}

// Q1 (currency conversion) is every bid with its price times 89/100.
func Q1(evs []nexmark.Event, _ []mtime.Time, _ nexmark.Config) []string {
	var out []string
	for _, e := range evs {
		if e.Bid != nil {
			b := *e.Bid
			b.Price = b.Price * 89 / 100
			out = append(out, fmt.Sprintf("%+v", b))
		}
	}
	return out
}

// Q2 (selection) is the auction and price of the bids on every
// AuctionSkip-th auction.
func Q2(evs []nexmark.Event, _ []mtime.Time, cfg nexmark.Config) []string {
	var out []string
	for _, e := range evs {
		if e.Bid != nil && e.Bid.Auction%cfg.AuctionSkip == 0 {
			out = append(out, fmt.Sprintf("%+v", nexmark.AuctionPrice{Auction: e.Bid.Auction, Price: e.Bid.Price}))
		}
	}
	return out
}

// Q3 (local item suggestion) is the full join of the sellers in OR, ID
// and CA with their category-10 auctions: the runs the tests make span far
// less event time than MaxAuctionsWaitingTime, so no state expires.
func Q3(evs []nexmark.Event, _ []mtime.Time, _ nexmark.Config) []string {
	people := map[int64]nexmark.Person{}
	for _, e := range evs {
		if p := e.Person; p != nil && (p.State == "OR" || p.State == "ID" || p.State == "CA") {
			people[p.ID] = *p
		}
	}
	var out []string
	for _, e := range evs {
		if a := e.Auction; a != nil && a.Category == 10 {
			if p, ok := people[a.Seller]; ok {
				out = append(out, fmt.Sprintf("%+v", nexmark.NameCityStateID{Name: p.Name, City: p.City, State: p.State, ID: a.ID}))
			}
		}
	}
	return out
}

// WinningBids (query 9): of the bids for an auction made before it expires at
// no less than its reserve, the highest price wins, then the earliest
// (then BetterBid's ties); the result's time is expires-1ms.
func WinningBids(evs []nexmark.Event) ([]nexmark.AuctionBid, []mtime.Time) {
	auctions := map[int64]nexmark.Auction{}
	for _, e := range evs {
		if e.Auction != nil {
			auctions[e.Auction.ID] = *e.Auction
		}
	}
	best := map[int64]nexmark.Bid{}
	for _, e := range evs {
		b := e.Bid
		if b == nil {
			continue
		}
		a, ok := auctions[b.Auction]
		if !ok || b.DateTime >= a.Expires || b.Price < a.Reserve {
			continue
		}
		cur, seen := best[b.Auction]
		if !seen || b.Price > cur.Price || b.Price == cur.Price && (b.DateTime < cur.DateTime ||
			b.DateTime == cur.DateTime && (b.Bidder < cur.Bidder || b.Bidder == cur.Bidder && b.Extra < cur.Extra)) {
			best[b.Auction] = *b
		}
	}
	var out []nexmark.AuctionBid
	var ts []mtime.Time
	for id, b := range best {
		out = append(out, nexmark.AuctionBid{Auction: auctions[id], Bid: b})
		ts = append(ts, auctions[id].Expires-1)
	}
	return out, ts
}

// Q4 (average price per category) is the mean winning price per category
// in each sliding window of the winning bids' times, rounded half up.
func Q4(evs []nexmark.Event, _ []mtime.Time, cfg nexmark.Config) []string {
	wins, ts := WinningBids(evs)
	size, period := cfg.WindowSizeSec*1000, cfg.WindowPeriodSec*1000
	type key struct{ window, category int64 }
	sums, counts := map[key]int64{}, map[key]int64{}
	for i, w := range wins {
		t := int64(ts[i])
		last := t - ((t%period)+period)%period
		for start := last; start > t-size; start -= period {
			k := key{start, w.Auction.Category}
			sums[k] += w.Bid.Price
			counts[k]++
		}
	}
	var out []string
	for k, sum := range sums {
		mean := float64(sum) / float64(counts[k])
		out = append(out, WindowKey(mtime.Time(k.window))+fmt.Sprintf("%+v", nexmark.CategoryPrice{Category: k.category, Price: int64(math.Floor(mean + 0.5)), IsLast: true}))
	}
	return out
}

// Q6 (average selling price by seller): a seller's sales in close order (then auction id); each gives
// the mean of the last ten up to it. (Times are not compared: the sales
// flushed at the end of input carry the time of the flush.)
func Q6(evs []nexmark.Event, _ []mtime.Time, _ nexmark.Config) []string {
	wins, ts := WinningBids(evs)
	type sale struct {
		time    mtime.Time
		auction int64
		price   int64
	}
	bySeller := map[int64][]sale{}
	for i, w := range wins {
		bySeller[w.Auction.Seller] = append(bySeller[w.Auction.Seller], sale{ts[i], w.Auction.ID, w.Bid.Price})
	}
	var out []string
	for seller, sales := range bySeller {
		sort.Slice(sales, func(i, j int) bool {
			return sales[i].time < sales[j].time || sales[i].time == sales[j].time && sales[i].auction < sales[j].auction
		})
		for i := range sales {
			from := max(0, i-9)
			sum := int64(0)
			for _, r := range sales[from : i+1] {
				sum += r.price
			}
			out = append(out, fmt.Sprintf("%+v", nexmark.SellerPrice{Seller: seller, Price: sum / int64(i+1-from)}))
		}
	}
	return out
}

// Q11 (user sessions): a bidder's bids sorted by time split into sessions wherever two
// consecutive bids are WindowSizeSec or more apart; a session's window runs
// from its first bid to its last plus the gap.
func Q11(evs []nexmark.Event, ts []mtime.Time, cfg nexmark.Config) []string {
	gap := mtime.Time(cfg.WindowSizeSec * 1000)
	times := map[int64][]mtime.Time{}
	for i, e := range evs {
		if e.Bid != nil {
			times[e.Bid.Bidder] = append(times[e.Bid.Bidder], ts[i])
		}
	}
	var out []string
	for bidder, tt := range times {
		sort.Slice(tt, func(i, j int) bool { return tt[i] < tt[j] })
		start, n := tt[0], int64(0)
		for i, t := range tt {
			if i > 0 && t-tt[i-1] >= gap {
				out = append(out, fmt.Sprintf("[%d,%d)%+v", start, tt[i-1]+gap, nexmark.BidsPerSession{Bidder: bidder, Bids: n}))
				start, n = t, 0
			}
			n++
		}
		out = append(out, fmt.Sprintf("[%d,%d)%+v", start, tt[len(tt)-1]+gap, nexmark.BidsPerSession{Bidder: bidder, Bids: n}))
	}
	return out
}

// WindowKey is how a windowed result starts: the window's start in
// milliseconds, in brackets.
func WindowKey(start mtime.Time) string { return fmt.Sprintf("[%d]", start) }

// Q5 (hot items) is, per sliding window, the auctions with the most bids
// and their count.
func Q5(evs []nexmark.Event, ts []mtime.Time, cfg nexmark.Config) []string {
	size, period := cfg.WindowSizeSec*1000, cfg.WindowPeriodSec*1000
	counts := map[int64]map[int64]int64{} // window start -> auction -> bids
	for i, e := range evs {
		if e.Bid == nil {
			continue
		}
		t := int64(ts[i])
		last := t - ((t%period)+period)%period
		for start := last; start > t-size; start -= period {
			if counts[start] == nil {
				counts[start] = map[int64]int64{}
			}
			counts[start][e.Bid.Auction]++
		}
	}
	var out []string
	for start, byAuction := range counts {
		best := int64(0)
		for _, n := range byAuction {
			best = max(best, n)
		}
		for a, n := range byAuction {
			if n == best {
				out = append(out, WindowKey(mtime.Time(start))+fmt.Sprintf("%+v", nexmark.AuctionCount{Auction: a, Count: n}))
			}
		}
	}
	return out
}

func fixedStart(t mtime.Time, cfg nexmark.Config) int64 {
	size := cfg.WindowSizeSec * 1000
	return int64(t) - ((int64(t)%size)+size)%size
}

// Q7 (highest bid) is, per fixed window, the bids with the highest price.
func Q7(evs []nexmark.Event, ts []mtime.Time, cfg nexmark.Config) []string {
	best := map[int64][]nexmark.Bid{}
	for i, e := range evs {
		if e.Bid == nil {
			continue
		}
		w := fixedStart(ts[i], cfg)
		cur := best[w]
		switch {
		case len(cur) == 0 || e.Bid.Price > cur[0].Price:
			best[w] = []nexmark.Bid{*e.Bid}
		case e.Bid.Price == cur[0].Price:
			best[w] = append(cur, *e.Bid)
		}
	}
	var out []string
	for w, bs := range best {
		for _, b := range bs {
			out = append(out, WindowKey(mtime.Time(w))+fmt.Sprintf("%+v", b))
		}
	}
	return out
}

// Q8 (monitor new users) is, per fixed window, every auction whose seller
// joined in that window: the person's id and name and the reserve.
func Q8(evs []nexmark.Event, ts []mtime.Time, cfg nexmark.Config) []string {
	type key struct{ window, id int64 }
	people := map[key]nexmark.Person{}
	for i, e := range evs {
		if e.Person != nil {
			people[key{fixedStart(ts[i], cfg), e.Person.ID}] = *e.Person
		}
	}
	var out []string
	for i, e := range evs {
		if e.Auction == nil {
			continue
		}
		w := fixedStart(ts[i], cfg)
		if p, ok := people[key{w, e.Auction.Seller}]; ok {
			out = append(out, WindowKey(mtime.Time(w))+fmt.Sprintf("%+v", nexmark.IDNameReserve{ID: p.ID, Name: p.Name, Reserve: e.Auction.Reserve}))
		}
	}
	return out
}

// Q12 (processing time windows) is each bidder's number of bids. The
// query's panes split it by processing time, which no model can foresee:
// what is compared is their sum per bidder (Q12Totals).
func Q12(evs []nexmark.Event, _ []mtime.Time, _ nexmark.Config) []string {
	counts := map[int64]int64{}
	for _, e := range evs {
		if e.Bid != nil {
			counts[e.Bid.Bidder]++
		}
	}
	var out []string
	for bidder, n := range counts {
		out = append(out, fmt.Sprintf("%+v", nexmark.BidsPerWindow{Bidder: bidder, Bids: n}))
	}
	return out
}

// Q12Totals adds up query 12's panes per bidder and renders the totals as
// Q12 does.
func Q12Totals(panes []nexmark.BidsPerWindow) []string {
	counts := map[int64]int64{}
	for _, p := range panes {
		counts[p.Bidder] += p.Bids
	}
	var out []string
	for bidder, n := range counts {
		out = append(out, fmt.Sprintf("%+v", nexmark.BidsPerWindow{Bidder: bidder, Bids: n}))
	}
	return out
}

// Compare fails t unless a query's rendered results equal its model's, as
// multisets, naming up to ten that differ; an empty model fails too (the
// test would prove nothing).
func Compare(t testing.TB, got, want []string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("the model expects no output: the test would prove nothing")
	}
	t.Logf("%d results", len(want))
	if d := differences(got, want); d != nil {
		t.Error(strings.Join(d, "\n"))
	}
}

// differences compares rendered results as multisets: nil when equal,
// else a summary and up to ten of the results that differ.
func differences(got, want []string) []string {
	gm, wm := map[string]int{}, map[string]int{}
	for _, s := range got {
		gm[s]++
	}
	for _, s := range want {
		wm[s]++
	}
	var diffs []string
	for s, n := range wm {
		if gm[s] != n {
			diffs = append(diffs, fmt.Sprintf("  %q: got %d, want %d", s, gm[s], n))
		}
	}
	for s, n := range gm {
		if wm[s] == 0 {
			diffs = append(diffs, fmt.Sprintf("  unexpected %q (x%d)", s, n))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	sort.Strings(diffs)
	if len(diffs) > 10 {
		diffs = append(diffs[:5], diffs[len(diffs)-5:]...)
	}
	return append([]string{fmt.Sprintf("got %d results, the model %d", len(got), len(want))}, diffs...)
}

// Run is one configuration the query tests run every query with.
type Run struct {
	// Config is the generator's configuration (defaults filled in, with
	// NumEvents events and the run's seed).
	Config nexmark.Config
	// Workers is the worker count.
	Workers int
}

// Name names the run in a subtest: seedS/workersW.
func (r Run) Name() string { return fmt.Sprintf("seed%d/workers%d", r.Config.Seed, r.Workers) }

// Runs are the three configurations of the query tests: Beam's defaults
// (100,000 events span 10 s of event time) on one worker, and slower rates
// that spread the events over 10 and 20 windows of 10 s, the last with
// out-of-order groups of 1,000, on two and three workers.
func Runs() []Run {
	runs := []Run{
		{Config: nexmark.Config{Seed: 0}, Workers: 1},
		{Config: nexmark.Config{Seed: 1, FirstEventRate: 1000}, Workers: 2},
		{Config: nexmark.Config{Seed: 2, FirstEventRate: 500, OutOfOrderGroupSize: 1000}, Workers: 3},
	}
	for i := range runs {
		runs[i].Config.NumEvents = NumEvents
		runs[i].Config.EnsureDefaults()
	}
	return runs
}
