package nexmark

import (
	"math"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
)

// AuctionBid is a closed auction and its winning bid.
type AuctionBid struct {
	Auction Auction `json:"auction"`
	Bid     Bid     `json:"bid"`
}

// CategoryPrice is query 4's result: a category's average winning price
// in a window, rounded to a whole cent.
type CategoryPrice struct {
	Category int64 `json:"category"`
	Price    int64 `json:"price"`
	IsLast   bool  `json:"isLast"`
}

// BetterBid reports whether bid a beats bid b for the same auction: a
// higher price, then an earlier time (Beam's PRICE_THEN_DESCENDING_TIME);
// the bidder and the padding break the remaining ties, so the winner does
// not depend on arrival order.
func BetterBid(a, b Bid) bool {
	switch {
	case a.Price != b.Price:
		return a.Price > b.Price
	case a.DateTime != b.DateTime:
		return a.DateTime < b.DateTime
	case a.Bidder != b.Bidder:
		return a.Bidder < b.Bidder
	}
	return a.Extra < b.Extra
}

// ExpectedAuctionDuration is the auction length Beam's WinningBids expects
// at the configuration's lowest rate: how long a bid waits for an auction
// that has not arrived yet (twice this).
func ExpectedAuctionDuration(cfg Config) mtime.Duration {
	cfg.EnsureDefaults()
	longest := int64(0)
	for _, d := range cfg.interEventDelayUs() {
		longest = max(longest, d)
	}
	longest = longest * ProportionDenominator / AuctionProportion * int64(cfg.NumInFlightAuctions)
	return mtime.Duration((longest + 999) / 1000)
}

// WinningBids finds the winning bid of every closed auction: of the bids
// for it made before it expires at no less than its reserve, the best
// (BetterBid). It joins auctions and bids per auction id in the global
// window: a bid waits for its auction (up to twice
// ExpectedAuctionDuration), and the winner is emitted when the watermark
// reaches the auction's expiry, with the time expires-1ms (the end of
// Beam's auction window). Beam merges per-auction windows instead, which
// weir's window functions do not offer.
func WinningBids(s weir.Scope, events weir.PCollection[Event], cfg Config) weir.PCollection[AuctionBid] {
	wait := 2 * ExpectedAuctionDuration(cfg)
	keyed := weir.FlatMap(s, "WinningBids.Key", events, func(e Event) []weir.KV[int64, Event] {
		switch {
		case e.Auction != nil:
			return []weir.KV[int64, Event]{{Key: e.Auction.ID, Value: Event{Auction: e.Auction}}}
		case e.Bid != nil:
			return []weir.KV[int64, Event]{{Key: e.Bid.Auction, Value: Event{Bid: e.Bid}}}
		}
		return nil
	})
	auctionState := weir.ValueState[Auction]{ID: "auction"}
	best := weir.ValueState[Bid]{ID: "best"}
	pending := weir.BagState[Bid]{ID: "pending"}
	closeTimer := weir.EventTimer("close")
	gcTimer := weir.EventTimer("gc")
	consider := func(c *weir.StateContext[int64, AuctionBid], a Auction, b Bid) {
		if b.DateTime >= a.Expires || b.Price < a.Reserve {
			return
		}
		if cur, ok := best.Read(c); !ok || BetterBid(b, cur) {
			best.Write(c, b)
		}
	}
	return weir.StatefulParDo(s, "WinningBids.Join", keyed, weir.StatefulFn[int64, Event, AuctionBid]{
		State:  []weir.StateDecl{auctionState, best, pending},
		Timers: []weir.TimerSpec{closeTimer, gcTimer},
		Process: func(c *weir.StateContext[int64, AuctionBid], e Event) error {
			a, known := auctionState.Read(c)
			switch {
			case e.Auction != nil:
				if known {
					return weir.Fail("duplicate_auction", "auction %d seen twice", e.Auction.ID)
				}
				a = *e.Auction
				auctionState.Write(c, a)
				for _, b := range pending.Read(c) {
					consider(c, a, b)
				}
				pending.Clear(c)
				closeAt := a.Expires.Add(-mtime.Millisecond)
				closeTimer.Set(c, closeAt)
				gcTimer.Set(c, closeAt.Add(wait))
			case e.Bid != nil:
				if known {
					consider(c, a, *e.Bid)
					return nil
				}
				pending.Add(c, *e.Bid)
				gcTimer.Set(c, e.Bid.DateTime.Add(wait))
			}
			return nil
		},
		OnTimer: func(c *weir.StateContext[int64, AuctionBid], t contract.Timer) error {
			if t.ID == "gc" {
				auctionState.Clear(c)
				best.Clear(c)
				pending.Clear(c)
				return nil
			}
			a, ok := auctionState.Read(c)
			b, won := best.Read(c)
			if ok && won {
				c.Output(AuctionBid{Auction: a, Bid: b})
			}
			best.Clear(c)
			return nil
		},
	})
}

// Query4 ('average price for a category') averages, per category, the
// winning prices of the auctions that closed in sliding windows of
// WindowSizeSec every WindowPeriodSec.
func Query4(s weir.Scope, events weir.PCollection[Event], cfg Config) weir.PCollection[CategoryPrice] {
	cfg.EnsureDefaults()
	size := mtime.Duration(cfg.WindowSizeSec) * mtime.Second
	period := mtime.Duration(cfg.WindowPeriodSec) * mtime.Second
	prices := weir.Map(s, "Q4.Rekey", WinningBids(s.Sub("Q4"), events, cfg), func(ab AuctionBid) weir.KV[int64, int64] {
		return weir.KV[int64, int64]{Key: ab.Auction.Category, Value: ab.Bid.Price}
	})
	windowed := weir.WindowInto(s, "Q4.Window", prices, weir.SlidingWindows(size, period))
	means := weir.CombinePerKey(s, "Q4.Mean", windowed, weir.Mean[int64]())
	return weir.ParDo(s, "Q4.Project", means, func(c *weir.Context, kv weir.KV[int64, float64], emit func(CategoryPrice)) error {
		emit(CategoryPrice{Category: kv.Key, Price: int64(math.Floor(kv.Value + 0.5)), IsLast: c.Pane().IsLast})
		return nil
	})
}

// SellerPrice is query 6's result: a seller's average selling price over
// their last (up to) ten closed auctions.
type SellerPrice struct {
	Seller int64 `json:"seller"`
	Price  int64 `json:"price"`
}

// query6Window is how many of a seller's last closed auctions query 6
// averages.
const query6Window = 10

// closedSale is one of a seller's closed auctions in query 6's state.
type closedSale struct {
	Time    mtime.Time `json:"time"`
	Auction int64      `json:"auction"`
	Price   int64      `json:"price"`
}

func saleBefore(a, b closedSale) bool {
	return a.Time < b.Time || a.Time == b.Time && a.Auction < b.Auction
}

// Query6 ('average selling price by seller') outputs, for every closed
// auction with a winning bid, its seller's average winning price over
// their last ten closed auctions up to it. Beam fires an accumulating
// combine per element, so its results depend on arrival order; here a
// sale waits until the watermark passes its close, so the sales of a
// seller are averaged in close order (then auction id) and every run
// gives the same results. (The runner drops event-time timers set while it
// finishes a bounded run, so the sales still waiting then are flushed at
// once, in the same order, with the time of that last firing.)
func Query6(s weir.Scope, events weir.PCollection[Event], cfg Config) weir.PCollection[SellerPrice] {
	bySeller := weir.Map(s, "Q6.Rekey", WinningBids(s.Sub("Q6"), events, cfg), func(ab AuctionBid) weir.KV[int64, closedSale] {
		return weir.KV[int64, closedSale]{Key: ab.Auction.Seller, Value: closedSale{Time: ab.Auction.Expires.Add(-mtime.Millisecond), Auction: ab.Auction.ID, Price: ab.Bid.Price}}
	})
	pending := weir.BagState[closedSale]{ID: "pending"}
	last := weir.ValueState[[]closedSale]{ID: "last"}
	next := weir.ValueState[mtime.Time]{ID: "next"}
	flush := weir.EventTimer("flush")
	return weir.StatefulParDo(s, "Q6.Average", bySeller, weir.StatefulFn[int64, closedSale, SellerPrice]{
		State:  []weir.StateDecl{pending, last, next},
		Timers: []weir.TimerSpec{flush},
		Process: func(c *weir.StateContext[int64, SellerPrice], sale closedSale) error {
			pending.Add(c, sale)
			if at, ok := next.Read(c); !ok || sale.Time < at {
				next.Write(c, sale.Time)
				flush.Set(c, sale.Time)
			}
			return nil
		},
		OnTimer: func(c *weir.StateContext[int64, SellerPrice], t contract.Timer) error {
			// At the end of input (the watermark at +∞) every sale has
			// arrived: flush them all, as a timer set here then would not
			// fire.
			upTo := t.Time
			if c.Watermark() >= mtime.MaxTimestamp {
				upTo = mtime.MaxTimestamp
			}
			var due, later []closedSale
			for _, sale := range pending.Read(c) {
				if sale.Time <= upTo {
					due = append(due, sale)
				} else {
					later = append(later, sale)
				}
			}
			sortSales(due)
			recent, _ := last.Read(c)
			for _, sale := range due {
				recent = append(recent, sale)
				if len(recent) > query6Window {
					recent = recent[len(recent)-query6Window:]
				}
				sum := int64(0)
				for _, r := range recent {
					sum += r.Price
				}
				c.Output(SellerPrice{Seller: c.Key(), Price: sum / int64(len(recent))})
			}
			last.Write(c, append([]closedSale(nil), recent...))
			pending.Clear(c)
			next.Clear(c)
			if len(later) > 0 {
				first := later[0].Time
				for _, sale := range later {
					pending.Add(c, sale)
					first = min(first, sale.Time)
				}
				next.Write(c, first)
				flush.Set(c, first)
			}
			return nil
		},
	})
}

// sortSales orders sales by close time, then auction id (insertion sort:
// a flush holds few).
func sortSales(s []closedSale) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && saleBefore(s[j], s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
