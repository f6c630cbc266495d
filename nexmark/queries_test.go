package nexmark_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/nexmark"
	"github.com/weir-dev/weir/nexmark/nexmarkmodel"
	"github.com/weir-dev/weir/window"
)

// collected renders a collector's elements as the models do.
func collected[T any](c *weir.Collector[T], windowed bool, describe func(T) string) []string {
	var out []string
	for _, e := range c.Elements() {
		s := describe(e.Value)
		if windowed {
			if e.Window == window.Global {
				s = "[global]" + s
			} else {
				s = nexmarkmodel.WindowKey(e.Window.Start) + s
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
	run   func(s weir.Scope, events weir.PCollection[nexmark.Event], cfg nexmark.Config) func() []string
	model func([]nexmark.Event, []mtime.Time, nexmark.Config) []string
}

func queryCases() []queryCase {
	return []queryCase{
		{"q0", func(s weir.Scope, ev weir.PCollection[nexmark.Event], cfg nexmark.Config) func() []string {
			c := weir.Collect(s, "Out", nexmark.Query0(s, ev, cfg))
			return func() []string { return collected(c, false, nexmarkmodel.DescribeEvent) }
		}, nexmarkmodel.Q0},
		{"q1", func(s weir.Scope, ev weir.PCollection[nexmark.Event], cfg nexmark.Config) func() []string {
			c := weir.Collect(s, "Out", nexmark.Query1(s, ev, cfg))
			return func() []string { return collected(c, false, plus[nexmark.Bid]) }
		}, nexmarkmodel.Q1},
		{"q2", func(s weir.Scope, ev weir.PCollection[nexmark.Event], cfg nexmark.Config) func() []string {
			c := weir.Collect(s, "Out", nexmark.Query2(s, ev, cfg))
			return func() []string { return collected(c, false, plus[nexmark.AuctionPrice]) }
		}, nexmarkmodel.Q2},
		{"q3", func(s weir.Scope, ev weir.PCollection[nexmark.Event], cfg nexmark.Config) func() []string {
			c := weir.Collect(s, "Out", nexmark.Query3(s, ev, cfg))
			return func() []string { return collected(c, false, plus[nexmark.NameCityStateID]) }
		}, nexmarkmodel.Q3},
		{"q4", func(s weir.Scope, ev weir.PCollection[nexmark.Event], cfg nexmark.Config) func() []string {
			c := weir.Collect(s, "Out", nexmark.Query4(s, ev, cfg))
			return func() []string { return collected(c, true, plus[nexmark.CategoryPrice]) }
		}, nexmarkmodel.Q4},
		{"q9", func(s weir.Scope, ev weir.PCollection[nexmark.Event], cfg nexmark.Config) func() []string {
			c := weir.Collect(s, "Out", nexmark.WinningBids(s, ev, cfg))
			return func() []string {
				var out []string
				for _, e := range c.Elements() {
					out = append(out, fmt.Sprintf("%d %+v", e.Time, e.Value))
				}
				return out
			}
		}, func(evs []nexmark.Event, _ []mtime.Time, _ nexmark.Config) []string {
			wins, ts := nexmarkmodel.WinningBids(evs)
			out := make([]string, len(wins))
			for i, w := range wins {
				out[i] = fmt.Sprintf("%d %+v", ts[i], w)
			}
			return out
		}},
		{"q6", func(s weir.Scope, ev weir.PCollection[nexmark.Event], cfg nexmark.Config) func() []string {
			c := weir.Collect(s, "Out", nexmark.Query6(s, ev, cfg))
			return func() []string { return collected(c, false, plus[nexmark.SellerPrice]) }
		}, nexmarkmodel.Q6},
		{"q11", func(s weir.Scope, ev weir.PCollection[nexmark.Event], cfg nexmark.Config) func() []string {
			c := weir.Collect(s, "Out", nexmark.Query11(s, ev, cfg))
			return func() []string {
				var out []string
				for _, e := range c.Elements() {
					out = append(out, fmt.Sprintf("[%d,%d)%+v", e.Window.Start, e.Window.End, e.Value))
				}
				return out
			}
		}, nexmarkmodel.Q11},
		{"q12", func(s weir.Scope, ev weir.PCollection[nexmark.Event], cfg nexmark.Config) func() []string {
			c := weir.Collect(s, "Out", nexmark.Query12(s, ev, cfg))
			return func() []string {
				var panes []nexmark.BidsPerWindow
				for _, e := range c.Elements() {
					panes = append(panes, e.Value)
				}
				return nexmarkmodel.Q12Totals(panes)
			}
		}, nexmarkmodel.Q12},
		{"q5", func(s weir.Scope, ev weir.PCollection[nexmark.Event], cfg nexmark.Config) func() []string {
			c := weir.Collect(s, "Out", nexmark.Query5(s, ev, cfg))
			return func() []string { return collected(c, true, plus[nexmark.AuctionCount]) }
		}, nexmarkmodel.Q5},
		{"q7", func(s weir.Scope, ev weir.PCollection[nexmark.Event], cfg nexmark.Config) func() []string {
			c := weir.Collect(s, "Out", nexmark.Query7(s, ev, cfg))
			return func() []string { return collected(c, true, plus[nexmark.Bid]) }
		}, nexmarkmodel.Q7},
		{"q8", func(s weir.Scope, ev weir.PCollection[nexmark.Event], cfg nexmark.Config) func() []string {
			c := weir.Collect(s, "Out", nexmark.Query8(s, ev, cfg))
			return func() []string { return collected(c, true, plus[nexmark.IDNameReserve]) }
		}, nexmarkmodel.Q8},
	}
}

func TestQueriesMatchModels(t *testing.T) {
	for _, qc := range queryCases() {
		for _, r := range nexmarkmodel.Runs() {
			cfg := r.Config
			t.Run(qc.name+"/"+r.Name(), func(t *testing.T) {
				evs, ts, err := nexmarkmodel.Events(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if span := ts[len(ts)-1] - ts[0]; qc.name == "q3" && span >= mtime.Time(cfg.MaxAuctionsWaitingTime*1000) {
					t.Fatalf("the run spans %v of event time; nexmarkmodel.Q3 assumes less than maxAuctionsWaitingTime", span)
				}
				want := qc.model(evs, ts, cfg)
				p := weir.NewPipeline()
				s := p.Root()
				events, err := nexmark.Read(s, "Events", cfg)
				if err != nil {
					t.Fatal(err)
				}
				got := qc.run(s, events, cfg)
				if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: r.Workers}); err != nil {
					t.Fatal(err)
				}
				nexmarkmodel.Compare(t, got(), want)
			})
		}
	}
}

// TestQuery12PanesFollowProcessingTime: query 12 fires a bidder's pane
// WindowSizeSec of processing time after its first bid, discarding what it
// fired, and fires the rest at the end of input; processing time is the
// TestStream's clock, so the panes are exact.
func TestQuery12PanesFollowProcessingTime(t *testing.T) {
	bid := func(bidder int64, at mtime.Time) weir.TimestampedValue[nexmark.Event] {
		return weir.TimestampedValue[nexmark.Event]{Value: nexmark.Event{Bid: &nexmark.Bid{Auction: 1000, Bidder: bidder, Price: 1, DateTime: at}}, Time: at}
	}
	p := weir.NewPipeline()
	s := p.Root()
	events := weir.TestStream(s, "Events", []weir.TestEvent[nexmark.Event]{
		weir.AddElements(bid(1, 1000), bid(1, 2000), bid(2, 2000)),
		weir.AdvanceProcessingTime[nexmark.Event](5 * mtime.Second),
		weir.AddElements(bid(1, 3000)),
		// 10 s after the panes' first bids: bidder 1's pane holds 3, 2's 1.
		weir.AdvanceProcessingTime[nexmark.Event](6 * mtime.Second),
		weir.AddElements(bid(1, 4000), bid(2, 4000), bid(2, 5000)),
		weir.AdvanceWatermarkToInfinity[nexmark.Event](),
	})
	c := weir.Collect(s, "Out", nexmark.Query12(s, events, nexmark.Config{}))
	if _, err := weir.Run(context.Background(), p, weir.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range c.Elements() {
		got = append(got, fmt.Sprintf("%+v", e.Value))
	}
	sort.Strings(got)
	want := []string{"{Bidder:1 Bids:1}", "{Bidder:1 Bids:3}", "{Bidder:2 Bids:1}", "{Bidder:2 Bids:2}"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("panes %v, want %v", got, want)
	}
}
