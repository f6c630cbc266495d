package nexmark

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"sort"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/window"
)

// The reference models below compute each query's expected output from the
// generated events with plain loops and maps, independently of the SDK and
// the runner (as Beam's QueryNModel classes do). Outputs are compared as
// sorted multisets of strings; a windowed query's strings start with the
// window.

const modelEvents = 100_000

// modelEventsOf returns the events a bounded source of cfg gives, with
// their times.
func modelEventsOf(t *testing.T, cfg Config) ([]Event, []mtime.Time) {
	t.Helper()
	g, err := NewGenerator(cfg, BaseTime)
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]Event, cfg.NumEvents)
	ts := make([]mtime.Time, cfg.NumEvents)
	for i := range evs {
		evs[i], ts[i] = g.Event(int64(i))
	}
	return evs, ts
}

func model0(evs []Event, _ []mtime.Time, _ Config) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = describeEvent(e)
	}
	return out
}

func describeEvent(e Event) string {
	switch {
	case e.Person != nil:
		return fmt.Sprintf("person %+v", *e.Person)
	case e.Auction != nil:
		return fmt.Sprintf("auction %+v", *e.Auction)
	}
	return fmt.Sprintf("bid %+v", *e.Bid)
}

func model1(evs []Event, _ []mtime.Time, _ Config) []string {
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

func model2(evs []Event, _ []mtime.Time, cfg Config) []string {
	var out []string
	for _, e := range evs {
		if e.Bid != nil && e.Bid.Auction%cfg.AuctionSkip == 0 {
			out = append(out, fmt.Sprintf("%+v", AuctionPrice{Auction: e.Bid.Auction, Price: e.Bid.Price}))
		}
	}
	return out
}

// model3 is the full join: the runs the test makes span far less event
// time than MaxAuctionsWaitingTime, so no state expires.
func model3(evs []Event, _ []mtime.Time, _ Config) []string {
	people := map[int64]Person{}
	for _, e := range evs {
		if p := e.Person; p != nil && (p.State == "OR" || p.State == "ID" || p.State == "CA") {
			people[p.ID] = *p
		}
	}
	var out []string
	for _, e := range evs {
		if a := e.Auction; a != nil && a.Category == 10 {
			if p, ok := people[a.Seller]; ok {
				out = append(out, fmt.Sprintf("%+v", NameCityStateID{Name: p.Name, City: p.City, State: p.State, ID: a.ID}))
			}
		}
	}
	return out
}

// modelWinningBids: of the bids for an auction made before it expires at
// no less than its reserve, the highest price wins, then the earliest
// (then BetterBid's ties); the result's time is expires-1ms.
func modelWinningBids(evs []Event) ([]AuctionBid, []mtime.Time) {
	auctions := map[int64]Auction{}
	for _, e := range evs {
		if e.Auction != nil {
			auctions[e.Auction.ID] = *e.Auction
		}
	}
	best := map[int64]Bid{}
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
	var out []AuctionBid
	var ts []mtime.Time
	for id, b := range best {
		out = append(out, AuctionBid{Auction: auctions[id], Bid: b})
		ts = append(ts, auctions[id].Expires-1)
	}
	return out, ts
}

func model4(evs []Event, _ []mtime.Time, cfg Config) []string {
	wins, ts := modelWinningBids(evs)
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
		out = append(out, windowKey(mtime.Time(k.window))+fmt.Sprintf("%+v", CategoryPrice{Category: k.category, Price: int64(math.Floor(mean + 0.5)), IsLast: true}))
	}
	return out
}

// model6: a seller's sales in close order (then auction id); each gives
// the mean of the last ten up to it. (Times are not compared: the sales
// flushed at the end of input carry the time of the flush.)
func model6(evs []Event, _ []mtime.Time, _ Config) []string {
	wins, ts := modelWinningBids(evs)
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
			out = append(out, fmt.Sprintf("%+v", SellerPrice{Seller: seller, Price: sum / int64(i+1-from)}))
		}
	}
	return out
}

// model11: a bidder's bids sorted by time split into sessions wherever two
// consecutive bids are WindowSizeSec or more apart; a session's window runs
// from its first bid to its last plus the gap.
func model11(evs []Event, ts []mtime.Time, cfg Config) []string {
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
				out = append(out, fmt.Sprintf("[%d,%d)%+v", start, tt[i-1]+gap, BidsPerSession{Bidder: bidder, Bids: n}))
				start, n = t, 0
			}
			n++
		}
		out = append(out, fmt.Sprintf("[%d,%d)%+v", start, tt[len(tt)-1]+gap, BidsPerSession{Bidder: bidder, Bids: n}))
	}
	return out
}

func windowKey(start mtime.Time) string { return fmt.Sprintf("[%d]", start) }

func model5(evs []Event, ts []mtime.Time, cfg Config) []string {
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
				out = append(out, windowKey(mtime.Time(start))+fmt.Sprintf("%+v", AuctionCount{Auction: a, Count: n}))
			}
		}
	}
	return out
}

func fixedStart(t mtime.Time, cfg Config) int64 {
	size := cfg.WindowSizeSec * 1000
	return int64(t) - ((int64(t)%size)+size)%size
}

func model7(evs []Event, ts []mtime.Time, cfg Config) []string {
	best := map[int64][]Bid{}
	for i, e := range evs {
		if e.Bid == nil {
			continue
		}
		w := fixedStart(ts[i], cfg)
		cur := best[w]
		switch {
		case len(cur) == 0 || e.Bid.Price > cur[0].Price:
			best[w] = []Bid{*e.Bid}
		case e.Bid.Price == cur[0].Price:
			best[w] = append(cur, *e.Bid)
		}
	}
	var out []string
	for w, bs := range best {
		for _, b := range bs {
			out = append(out, windowKey(mtime.Time(w))+fmt.Sprintf("%+v", b))
		}
	}
	return out
}

func model8(evs []Event, ts []mtime.Time, cfg Config) []string {
	type key struct{ window, id int64 }
	people := map[key]Person{}
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
			out = append(out, windowKey(mtime.Time(w))+fmt.Sprintf("%+v", IDNameReserve{ID: p.ID, Name: p.Name, Reserve: e.Auction.Reserve}))
		}
	}
	return out
}

// collected renders a collector's elements as the models do.
func collected[T any](c *weir.Collector[T], windowed bool, describe func(T) string) []string {
	var out []string
	for _, e := range c.Elements() {
		s := describe(e.Value)
		if windowed {
			if e.Window == window.Global {
				s = "[global]" + s
			} else {
				s = windowKey(e.Window.Start) + s
			}
		}
		out = append(out, s)
	}
	return out
}

func plus[T any](v T) string { return fmt.Sprintf("%+v", v) }

// queryCase runs one query over a bounded source and returns its output.
type queryCase struct {
	name  string
	run   func(s weir.Scope, events weir.PCollection[Event], cfg Config) func() []string
	model func([]Event, []mtime.Time, Config) []string
}

func queryCases() []queryCase {
	return []queryCase{
		{"q0", func(s weir.Scope, ev weir.PCollection[Event], cfg Config) func() []string {
			c := weir.Collect(s, "Out", Query0(s, ev, cfg))
			return func() []string { return collected(c, false, describeEvent) }
		}, model0},
		{"q1", func(s weir.Scope, ev weir.PCollection[Event], cfg Config) func() []string {
			c := weir.Collect(s, "Out", Query1(s, ev, cfg))
			return func() []string { return collected(c, false, plus[Bid]) }
		}, model1},
		{"q2", func(s weir.Scope, ev weir.PCollection[Event], cfg Config) func() []string {
			c := weir.Collect(s, "Out", Query2(s, ev, cfg))
			return func() []string { return collected(c, false, plus[AuctionPrice]) }
		}, model2},
		{"q3", func(s weir.Scope, ev weir.PCollection[Event], cfg Config) func() []string {
			c := weir.Collect(s, "Out", Query3(s, ev, cfg))
			return func() []string { return collected(c, false, plus[NameCityStateID]) }
		}, model3},
		{"q4", func(s weir.Scope, ev weir.PCollection[Event], cfg Config) func() []string {
			c := weir.Collect(s, "Out", Query4(s, ev, cfg))
			return func() []string { return collected(c, true, plus[CategoryPrice]) }
		}, model4},
		{"q9", func(s weir.Scope, ev weir.PCollection[Event], cfg Config) func() []string {
			c := weir.Collect(s, "Out", WinningBids(s, ev, cfg))
			return func() []string {
				var out []string
				for _, e := range c.Elements() {
					out = append(out, fmt.Sprintf("%d %+v", e.Time, e.Value))
				}
				return out
			}
		}, func(evs []Event, _ []mtime.Time, _ Config) []string {
			wins, ts := modelWinningBids(evs)
			out := make([]string, len(wins))
			for i, w := range wins {
				out[i] = fmt.Sprintf("%d %+v", ts[i], w)
			}
			return out
		}},
		{"q6", func(s weir.Scope, ev weir.PCollection[Event], cfg Config) func() []string {
			c := weir.Collect(s, "Out", Query6(s, ev, cfg))
			return func() []string { return collected(c, false, plus[SellerPrice]) }
		}, model6},
		{"q11", func(s weir.Scope, ev weir.PCollection[Event], cfg Config) func() []string {
			c := weir.Collect(s, "Out", Query11(s, ev, cfg))
			return func() []string {
				var out []string
				for _, e := range c.Elements() {
					out = append(out, fmt.Sprintf("[%d,%d)%+v", e.Window.Start, e.Window.End, e.Value))
				}
				return out
			}
		}, model11},
		{"q5", func(s weir.Scope, ev weir.PCollection[Event], cfg Config) func() []string {
			c := weir.Collect(s, "Out", Query5(s, ev, cfg))
			return func() []string { return collected(c, true, plus[AuctionCount]) }
		}, model5},
		{"q7", func(s weir.Scope, ev weir.PCollection[Event], cfg Config) func() []string {
			c := weir.Collect(s, "Out", Query7(s, ev, cfg))
			return func() []string { return collected(c, true, plus[Bid]) }
		}, model7},
		{"q8", func(s weir.Scope, ev weir.PCollection[Event], cfg Config) func() []string {
			c := weir.Collect(s, "Out", Query8(s, ev, cfg))
			return func() []string { return collected(c, true, plus[IDNameReserve]) }
		}, model8},
	}
}

func TestQueriesMatchModels(t *testing.T) {
	runs := []struct {
		seed    int64
		workers int
		cfg     Config
	}{
		// Beam's defaults: 100,000 events span 10 s of event time.
		{seed: 0, workers: 1},
		// Slower rates spread the events over 10 and 20 windows of 10 s.
		{seed: 1, workers: 2, cfg: Config{FirstEventRate: 1000}},
		{seed: 2, workers: 3, cfg: Config{FirstEventRate: 500, OutOfOrderGroupSize: 1000}},
	}
	for _, qc := range queryCases() {
		for _, r := range runs {
			cfg := r.cfg
			cfg.NumEvents = modelEvents
			cfg.Seed = r.seed
			cfg.EnsureDefaults()
			t.Run(fmt.Sprintf("%s/seed%d/workers%d", qc.name, r.seed, r.workers), func(t *testing.T) {
				evs, ts := modelEventsOf(t, cfg)
				if span := ts[len(ts)-1] - ts[0]; qc.name == "q3" && span >= mtime.Time(cfg.MaxAuctionsWaitingTime*1000) {
					t.Fatalf("the run spans %v of event time; model3 assumes less than maxAuctionsWaitingTime", span)
				}
				want := qc.model(evs, ts, cfg)
				p := weir.NewPipeline()
				s := p.Root()
				events, err := Read(s, "Events", cfg)
				if err != nil {
					t.Fatal(err)
				}
				got := qc.run(s, events, cfg)
				if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: r.workers}); err != nil {
					t.Fatal(err)
				}
				t.Logf("%d results", len(want))
				compareOutputs(t, got(), want)
			})
		}
	}
}

func compareOutputs(t *testing.T, got, want []string) {
	t.Helper()
	sort.Strings(got)
	sort.Strings(want)
	if len(want) == 0 {
		t.Fatal("the model expects no output: the test would prove nothing")
	}
	if reflect.DeepEqual(got, want) {
		return
	}
	t.Errorf("got %d results, the model %d", len(got), len(want))
	gm, wm := map[string]int{}, map[string]int{}
	for _, s := range got {
		gm[s]++
	}
	for _, s := range want {
		wm[s]++
	}
	shown := 0
	for s, n := range wm {
		if gm[s] != n && shown < 5 {
			t.Errorf("  %q: got %d, want %d", s, gm[s], n)
			shown++
		}
	}
	for s, n := range gm {
		if wm[s] == 0 && shown < 10 {
			t.Errorf("  unexpected %q (x%d)", s, n)
			shown++
		}
	}
}
