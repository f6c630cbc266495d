package nexmark

import (
	"fmt"
	"sort"
	"strings"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// The queries' result types, named as in Beam's Nexmark model.
type (
	// AuctionPrice is query 2's result: a bid's auction and price.
	AuctionPrice struct {
		Auction int64 `json:"auction"`
		Price   int64 `json:"price"`
	}
	// NameCityStateID is query 3's result: a seller and one of their auctions.
	NameCityStateID struct {
		Name  string `json:"name"`
		City  string `json:"city"`
		State string `json:"state"`
		ID    int64  `json:"id"`
	}
	// AuctionCount is query 5's result: an auction and its number of bids
	// in a window.
	AuctionCount struct {
		Auction int64 `json:"auction"`
		Count   int64 `json:"num"`
	}
	// IDNameReserve is query 8's result: a new person and the reserve of an
	// auction they opened in the same window.
	IDNameReserve struct {
		ID      int64  `json:"id"`
		Name    string `json:"name"`
		Reserve int64  `json:"reserve"`
	}
)

// Query0 passes every event through a ParDo (Beam's query 0 measures the
// cost of moving events between steps).
func Query0(s weir.Scope, events weir.PCollection[Event], _ Config) weir.PCollection[Event] {
	return weir.Map(s, "Q0.PassThrough", events, func(e Event) Event { return e })
}

// DollarToEuro converts a price in US cents to euro cents as query 1 does.
func DollarToEuro(price int64) int64 { return price * 89 / 100 }

// Query1 converts every bid's price from dollars to euros ('currency
// conversion').
func Query1(s weir.Scope, events weir.PCollection[Event], _ Config) weir.PCollection[Bid] {
	return weir.ParDo(s, "Q1.ToEuro", events, func(_ *weir.Context, e Event, emit func(Bid)) error {
		if e.Bid != nil {
			b := *e.Bid
			b.Price = DollarToEuro(b.Price)
			emit(b)
		}
		return nil
	})
}

// Query2 keeps the bids of every AuctionSkip'th auction, as auction and
// price ('selection').
func Query2(s weir.Scope, events weir.PCollection[Event], cfg Config) weir.PCollection[AuctionPrice] {
	cfg.EnsureDefaults()
	skip := cfg.AuctionSkip
	return weir.ParDo(s, "Q2.Select", events, func(_ *weir.Context, e Event, emit func(AuctionPrice)) error {
		if e.Bid != nil && e.Bid.Auction%skip == 0 {
			emit(AuctionPrice{Auction: e.Bid.Auction, Price: e.Bid.Price})
		}
		return nil
	})
}

// query3States are the states query 3 selects sellers in.
var query3States = map[string]bool{"OR": true, "ID": true, "CA": true}

// Query3Category is the category query 3 selects auctions in.
const Query3Category = 10

// Query3 ('local item suggestion') joins, in the global window, the
// auctions of category 10 with their sellers when those live in OR, ID or
// CA, whichever comes first: a person is kept for the auctions still to
// come, an auction waits for its seller; both are dropped
// MaxAuctionsWaitingTime seconds (of event time) after the key's last event.
func Query3(s weir.Scope, events weir.PCollection[Event], cfg Config) weir.PCollection[NameCityStateID] {
	cfg.EnsureDefaults()
	wait := mtime.Duration(cfg.MaxAuctionsWaitingTime) * mtime.Second
	keyed := weir.FlatMap(s, "Q3.Key", events, func(e Event) []weir.KV[int64, Event] {
		switch {
		case e.Person != nil && query3States[e.Person.State]:
			return []weir.KV[int64, Event]{{Key: e.Person.ID, Value: e}}
		case e.Auction != nil && e.Auction.Category == Query3Category:
			return []weir.KV[int64, Event]{{Key: e.Auction.Seller, Value: e}}
		}
		return nil
	})
	person := weir.ValueState[Person]{ID: "person"}
	pending := weir.BagState[Auction]{ID: "auctions"}
	expiry := weir.EventTimer("stateExpiring")
	return weir.StatefulParDo(s, "Q3.Join", keyed, weir.StatefulFn[int64, Event, NameCityStateID]{
		State:  []weir.StateDecl{person, pending},
		Timers: []weir.TimerSpec{expiry},
		Process: func(c *weir.StateContext[int64, NameCityStateID], e Event) error {
			known, haveKnown := person.Read(c)
			switch {
			case e.Person != nil:
				if haveKnown {
					return weir.Fail("duplicate_person", "person %d seen twice", e.Person.ID)
				}
				p := *e.Person
				person.Write(c, p)
				for _, a := range pending.Read(c) {
					c.Output(NameCityStateID{Name: p.Name, City: p.City, State: p.State, ID: a.ID})
				}
				pending.Clear(c)
			case e.Auction != nil:
				if haveKnown {
					c.Output(NameCityStateID{Name: known.Name, City: known.City, State: known.State, ID: e.Auction.ID})
				} else {
					pending.Add(c, *e.Auction)
				}
			}
			expiry.Set(c, c.Timestamp().Add(wait))
			return nil
		},
		OnTimer: func(c *weir.StateContext[int64, NameCityStateID], _ contract.Timer) error {
			person.Clear(c)
			pending.Clear(c)
			return nil
		},
	})
}

// topAuctions is query 5's accumulator: the highest count so far and the
// auctions that have it.
type topAuctions struct {
	Count    int64   `json:"count"`
	Auctions []int64 `json:"auctions"`
}

type topAuctionsFn struct{}

func (topAuctionsFn) CreateAccumulator() topAuctions { return topAuctions{} }
func (topAuctionsFn) AddInput(a topAuctions, in AuctionCount) topAuctions {
	switch {
	case in.Count > a.Count:
		return topAuctions{Count: in.Count, Auctions: []int64{in.Auction}}
	case in.Count == a.Count:
		a.Auctions = append(a.Auctions, in.Auction)
	}
	return a
}
func (topAuctionsFn) MergeAccumulators(a, b topAuctions) topAuctions {
	switch {
	case b.Count > a.Count:
		return b
	case b.Count == a.Count:
		a.Auctions = append(a.Auctions, b.Auctions...)
	}
	return a
}
func (topAuctionsFn) ExtractOutput(a topAuctions) topAuctions { return a }

// Query5 ('hot items') counts the bids of every auction in sliding windows
// of WindowSizeSec every WindowPeriodSec and outputs, per window, the
// auctions with the most bids.
func Query5(s weir.Scope, events weir.PCollection[Event], cfg Config) weir.PCollection[AuctionCount] {
	cfg.EnsureDefaults()
	size := mtime.Duration(cfg.WindowSizeSec) * mtime.Second
	period := mtime.Duration(cfg.WindowPeriodSec) * mtime.Second
	byAuction := weir.ParDo(s, "Q5.BidToAuction", events, func(_ *weir.Context, e Event, emit func(weir.KV[int64, int64])) error {
		if e.Bid != nil {
			emit(weir.KV[int64, int64]{Key: e.Bid.Auction, Value: 1})
		}
		return nil
	})
	windowed := weir.WindowInto(s, "Q5.Window", byAuction, weir.SlidingWindows(size, period))
	counts := weir.CombinePerKey(s, "Q5.Count", windowed, weir.Sum[int64]())
	global := weir.Map(s, "Q5.ToOneKey", counts, func(kv weir.KV[int64, int64]) weir.KV[int8, AuctionCount] {
		return weir.KV[int8, AuctionCount]{Value: AuctionCount{Auction: kv.Key, Count: kv.Value}}
	})
	top := weir.CombinePerKey(s, "Q5.Top", global, weir.CombineFn[AuctionCount, topAuctions, topAuctions](topAuctionsFn{}))
	return weir.FlatMap(s, "Q5.Select", top, func(kv weir.KV[int8, topAuctions]) []AuctionCount {
		out := make([]AuctionCount, len(kv.Value.Auctions))
		for i, a := range kv.Value.Auctions {
			out[i] = AuctionCount{Auction: a, Count: kv.Value.Count}
		}
		return out
	})
}

// highestBids is query 7's accumulator: the highest price so far and the
// bids at that price.
type highestBids struct {
	Price int64 `json:"price"`
	Bids  []Bid `json:"bids"`
}

type highestBidsFn struct{}

func (highestBidsFn) CreateAccumulator() highestBids { return highestBids{Price: -1} }
func (highestBidsFn) AddInput(a highestBids, in Bid) highestBids {
	switch {
	case in.Price > a.Price:
		return highestBids{Price: in.Price, Bids: []Bid{in}}
	case in.Price == a.Price:
		a.Bids = append(a.Bids, in)
	}
	return a
}
func (highestBidsFn) MergeAccumulators(a, b highestBids) highestBids {
	switch {
	case b.Price > a.Price:
		return b
	case b.Price == a.Price:
		a.Bids = append(a.Bids, b.Bids...)
	}
	return a
}
func (highestBidsFn) ExtractOutput(a highestBids) highestBids { return a }

// Query7 ('highest bid') outputs, per fixed window of WindowSizeSec, the
// bids at the window's highest price. Beam computes the maximum and joins
// it back to the window's bids; one combine that keeps the bids at the
// running maximum gives the same result in one pass.
func Query7(s weir.Scope, events weir.PCollection[Event], cfg Config) weir.PCollection[Bid] {
	cfg.EnsureDefaults()
	size := mtime.Duration(cfg.WindowSizeSec) * mtime.Second
	keyed := weir.ParDo(s, "Q7.Bids", events, func(_ *weir.Context, e Event, emit func(weir.KV[int8, Bid])) error {
		if e.Bid != nil {
			emit(weir.KV[int8, Bid]{Value: *e.Bid})
		}
		return nil
	})
	windowed := weir.WindowInto(s, "Q7.Window", keyed, weir.FixedWindows(size))
	top := weir.CombinePerKey(s, "Q7.Max", windowed, weir.CombineFn[Bid, highestBids, highestBids](highestBidsFn{}))
	return weir.FlatMap(s, "Q7.Select", top, func(kv weir.KV[int8, highestBids]) []Bid { return kv.Value.Bids })
}

// Query8 ('monitor new users') joins, per fixed window of WindowSizeSec,
// the people who joined with the auctions they opened: one result per
// auction whose seller joined in the same window.
func Query8(s weir.Scope, events weir.PCollection[Event], cfg Config) weir.PCollection[IDNameReserve] {
	cfg.EnsureDefaults()
	size := mtime.Duration(cfg.WindowSizeSec) * mtime.Second
	keyed := weir.FlatMap(s, "Q8.Key", events, func(e Event) []weir.KV[int64, Event] {
		switch {
		case e.Person != nil:
			return []weir.KV[int64, Event]{{Key: e.Person.ID, Value: Event{Person: e.Person}}}
		case e.Auction != nil:
			return []weir.KV[int64, Event]{{Key: e.Auction.Seller, Value: Event{Auction: e.Auction}}}
		}
		return nil
	})
	windowed := weir.WindowInto(s, "Q8.Window", keyed, weir.FixedWindows(size))
	grouped := weir.GroupByKey(s, "Q8.Join", windowed)
	return weir.FlatMap(s, "Q8.Select", grouped, func(kv weir.KV[int64, []Event]) []IDNameReserve {
		var p *Person
		for _, e := range kv.Value {
			if e.Person != nil {
				p = e.Person
				break
			}
		}
		if p == nil {
			return nil
		}
		var out []IDNameReserve
		for _, e := range kv.Value {
			if e.Auction != nil {
				out = append(out, IDNameReserve{ID: p.ID, Name: p.Name, Reserve: e.Auction.Reserve})
			}
		}
		return out
	})
}

// BidsPerSession is query 11's result: a bidder's number of bids in one of
// their sessions.
type BidsPerSession struct {
	Bidder int64 `json:"personId"`
	Bids   int64 `json:"bidsPerSession"`
}

// Query11 ('user sessions') counts each bidder's bids per session: bids
// less than WindowSizeSec apart belong to one session.
func Query11(s weir.Scope, events weir.PCollection[Event], cfg Config) weir.PCollection[BidsPerSession] {
	cfg.EnsureDefaults()
	gap := mtime.Duration(cfg.WindowSizeSec) * mtime.Second
	counts := bidsPerBidder(s, "Q11", "Sessions", events, weir.Sessions(gap))
	return weir.Map(s, "Q11.Project", counts, func(kv weir.KV[int64, int64]) BidsPerSession {
		return BidsPerSession{Bidder: kv.Key, Bids: kv.Value}
	})
}

// BidsPerWindow is query 12's result: a bidder's number of bids in one
// processing-time window (one pane).
type BidsPerWindow struct {
	Bidder int64 `json:"bidder"`
	Bids   int64 `json:"bidCount"`
}

// Query12 ('processing time windows') counts each bidder's bids in
// windows of processing time, as Beam's: the global window with a trigger
// that fires WindowSizeSec of processing time after a pane's first bid,
// repeatedly, discarding what it fired. The counts depend on how fast the
// bids are read; a bidder's counts add up to their bids (the last pane
// fires at the end of a bounded input).
func Query12(s weir.Scope, events weir.PCollection[Event], cfg Config) weir.PCollection[BidsPerWindow] {
	cfg.EnsureDefaults()
	delay := mtime.Duration(cfg.WindowSizeSec) * mtime.Second
	w := weir.Windowing{Fn: window.GlobalFn(), Trigger: window.Repeatedly(window.AfterProcessingTime(delay)), Accumulation: window.Discarding}
	counts := bidsPerBidder(s, "Q12", "Window", events, w)
	return weir.Map(s, "Q12.Project", counts, func(kv weir.KV[int64, int64]) BidsPerWindow {
		return BidsPerWindow{Bidder: kv.Key, Bids: kv.Value}
	})
}

// bidsPerBidder counts each bidder's bids in the windows of w, in steps
// named query.Bidders, query.WINDOW and query.Count (queries 11 and 12).
func bidsPerBidder(s weir.Scope, query, windowStep string, events weir.PCollection[Event], w weir.Windowing) weir.PCollection[weir.KV[int64, int64]] {
	byBidder := weir.ParDo(s, query+".Bidders", events, func(_ *weir.Context, e Event, emit func(weir.KV[int64, int64])) error {
		if e.Bid != nil {
			emit(weir.KV[int64, int64]{Key: e.Bid.Bidder, Value: 1})
		}
		return nil
	})
	windowed := weir.WindowInto(s, query+"."+windowStep, byBidder, w)
	return weir.CombinePerKey(s, query+".Count", windowed, weir.Sum[int64]())
}

// Query is one Nexmark query, for tools that run them by name.
type Query struct {
	// Name is "q0" to "q9", "q11" or "q12".
	Name string
	// Doc says what the query computes.
	Doc string
	// Apply adds the query's steps after events, writing its results to
	// sink through a step named name.
	Apply func(s weir.Scope, events weir.PCollection[Event], cfg Config, name string, sink contract.Sink)
}

func writeTo[T any](f func(weir.Scope, weir.PCollection[Event], Config) weir.PCollection[T]) func(weir.Scope, weir.PCollection[Event], Config, string, contract.Sink) {
	return func(s weir.Scope, events weir.PCollection[Event], cfg Config, name string, sink contract.Sink) {
		weir.Write(s, name, f(s, events, cfg), sink)
	}
}

// Queries returns the queries this package implements, in order.
func Queries() []Query {
	return []Query{
		{Name: "q0", Doc: "passthrough", Apply: writeTo(Query0)},
		{Name: "q1", Doc: "currency conversion", Apply: writeTo(Query1)},
		{Name: "q2", Doc: "selection", Apply: writeTo(Query2)},
		{Name: "q3", Doc: "local item suggestion (join of persons and auctions)", Apply: writeTo(Query3)},
		{Name: "q4", Doc: "average price per category (winning bids, sliding windows)", Apply: writeTo(Query4)},
		{Name: "q5", Doc: "hot items (sliding windows)", Apply: writeTo(Query5)},
		{Name: "q6", Doc: "average selling price by seller (winning bids, last ten per seller)", Apply: writeTo(Query6)},
		{Name: "q7", Doc: "highest bid (fixed windows, max)", Apply: writeTo(Query7)},
		{Name: "q8", Doc: "monitor new users (windowed join)", Apply: writeTo(Query8)},
		{Name: "q9", Doc: "winning bids (per-auction join)", Apply: writeTo(WinningBids)},
		{Name: "q11", Doc: "user sessions (bids per bidder per session window)", Apply: writeTo(Query11)},
		{Name: "q12", Doc: "processing time windows (bids per bidder per pane of processing time)", Apply: writeTo(Query12)},
	}
}

// LookupQueries returns the queries named in a comma-separated list
// ("q0,q1"; "all" for every query), or an error naming the unknown ones.
func LookupQueries(list string) ([]Query, error) {
	all := Queries()
	if strings.TrimSpace(list) == "all" {
		return all, nil
	}
	byName := map[string]Query{}
	var names []string
	for _, q := range all {
		byName[q.Name] = q
		names = append(names, q.Name)
	}
	sort.Strings(names)
	var out []Query
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		q, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("unknown Nexmark query %q (known: %s, or all)", n, strings.Join(names, ", "))
		}
		out = append(out, q)
	}
	return out, nil
}
