package yamlpipe

import (
	"context"
	"fmt"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/nexmark"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// ---- Nexmark ----

// nexmarkKeys are the config keys of `type: Nexmark`: Beam's
// NexmarkConfiguration names (see nexmark.Config), plus seed.
var nexmarkKeys = []string{
	"numEvents", "numEventGenerators", "rateShape", "firstEventRate", "nextEventRate", "rateUnit", "ratePeriodSec",
	"isRateLimited", "useWallclockEventTime", "avgPersonByteSize", "avgAuctionByteSize", "avgBidByteSize",
	"hotAuctionRatio", "hotSellersRatio", "hotBiddersRatio", "numInFlightAuctions", "numActivePeople",
	"outOfOrderGroupSize", "seed",
}

// Nexmark row schemas: an event row has the nested rows newPerson,
// newAuction and bid (Beam's Event fields), exactly one of them non-null,
// and eventType, which says which: "PERSON", "AUCTION" or "BID" (Beam's
// Event.Type; a filter tests it, as CEL cannot compare a row with null).
// nexmarkSchemas holds the schemas of one Nexmark source's rows.
type nexmarkSchemas struct {
	event, person, auction, bid *row.Schema
}

func newNexmarkSchemas() *nexmarkSchemas {
	s := &nexmarkSchemas{}
	s.person = row.MustSchema(
		row.Field{Name: "id", Type: row.Of(row.KindInt)},
		row.Field{Name: "name", Type: row.Of(row.KindString)},
		row.Field{Name: "emailAddress", Type: row.Of(row.KindString)},
		row.Field{Name: "creditCard", Type: row.Of(row.KindString)},
		row.Field{Name: "city", Type: row.Of(row.KindString)},
		row.Field{Name: "state", Type: row.Of(row.KindString)},
		row.Field{Name: "dateTime", Type: row.Of(row.KindTimestamp)},
		row.Field{Name: "extra", Type: row.Of(row.KindString)},
	)
	s.auction = row.MustSchema(
		row.Field{Name: "id", Type: row.Of(row.KindInt)},
		row.Field{Name: "itemName", Type: row.Of(row.KindString)},
		row.Field{Name: "description", Type: row.Of(row.KindString)},
		row.Field{Name: "initialBid", Type: row.Of(row.KindInt)},
		row.Field{Name: "reserve", Type: row.Of(row.KindInt)},
		row.Field{Name: "dateTime", Type: row.Of(row.KindTimestamp)},
		row.Field{Name: "expires", Type: row.Of(row.KindTimestamp)},
		row.Field{Name: "seller", Type: row.Of(row.KindInt)},
		row.Field{Name: "category", Type: row.Of(row.KindInt)},
		row.Field{Name: "extra", Type: row.Of(row.KindString)},
	)
	s.bid = row.MustSchema(
		row.Field{Name: "auction", Type: row.Of(row.KindInt)},
		row.Field{Name: "bidder", Type: row.Of(row.KindInt)},
		row.Field{Name: "price", Type: row.Of(row.KindInt)},
		row.Field{Name: "dateTime", Type: row.Of(row.KindTimestamp)},
		row.Field{Name: "extra", Type: row.Of(row.KindString)},
	)
	s.event = row.MustSchema(
		row.Field{Name: "eventType", Type: row.Of(row.KindString)},
		row.Field{Name: "newPerson", Type: row.RowOf(s.person)},
		row.Field{Name: "newAuction", Type: row.RowOf(s.auction)},
		row.Field{Name: "bid", Type: row.RowOf(s.bid)},
	)
	return s
}

// The eventType values (nexmark.Kind's names).
const (
	kindPerson  = "PERSON"
	kindAuction = "AUCTION"
	kindBid     = "BID"
)

// nexmarkRow is an event row and its nested row in one allocation.
type nexmarkRow struct {
	outer  rowT
	ov     [4]any
	inner  rowT
	values [10]any
}

// row returns the row of e.
func (s *nexmarkSchemas) row(e nexmark.Event) *row.Row {
	nr := &nexmarkRow{}
	nr.outer = rowT{Schema: s.event, Values: nr.ov[:]}
	switch {
	case e.Person != nil:
		p := e.Person
		nr.values = [10]any{p.ID, p.Name, p.EmailAddress, p.CreditCard, p.City, p.State, p.DateTime, p.Extra}
		nr.inner = rowT{Schema: s.person, Values: nr.values[:8]}
		nr.ov[0], nr.ov[1] = kindPerson, &nr.inner
	case e.Auction != nil:
		a := e.Auction
		nr.values = [10]any{a.ID, a.ItemName, a.Description, a.InitialBid, a.Reserve, a.DateTime, a.Expires, a.Seller, a.Category, a.Extra}
		nr.inner = rowT{Schema: s.auction, Values: nr.values[:10]}
		nr.ov[0], nr.ov[2] = kindAuction, &nr.inner
	case e.Bid != nil:
		b := e.Bid
		nr.values = [10]any{b.Auction, b.Bidder, b.Price, b.DateTime, b.Extra}
		nr.inner = rowT{Schema: s.bid, Values: nr.values[:5]}
		nr.ov[0], nr.ov[3] = kindBid, &nr.inner
	}
	return &nr.outer
}

func buildNexmark(l *loader, t *transformSpec, _ []*coll) (*coll, error) {
	var cfg nexmark.Config
	c := t.config
	ints := map[string]*int64{"numEvents": &cfg.NumEvents, "outOfOrderGroupSize": &cfg.OutOfOrderGroupSize, "seed": &cfg.Seed}
	smallInts := map[string]*int{
		"numEventGenerators": &cfg.NumEventGenerators, "firstEventRate": &cfg.FirstEventRate, "nextEventRate": &cfg.NextEventRate,
		"ratePeriodSec": &cfg.RatePeriodSec, "avgPersonByteSize": &cfg.AvgPersonByteSize, "avgAuctionByteSize": &cfg.AvgAuctionByteSize,
		"avgBidByteSize": &cfg.AvgBidByteSize, "hotAuctionRatio": &cfg.HotAuctionRatio, "hotSellersRatio": &cfg.HotSellersRatio,
		"hotBiddersRatio": &cfg.HotBiddersRatio, "numInFlightAuctions": &cfg.NumInFlightAuctions, "numActivePeople": &cfg.NumActivePeople,
	}
	for _, key := range nexmarkKeys {
		n := c.get(key)
		if n == nil {
			continue
		}
		var err error
		switch key {
		case "rateShape":
			var s string
			s, _, err = l.optStr(c, key)
			cfg.RateShape = nexmark.RateShape(s)
		case "rateUnit":
			var s string
			s, _, err = l.optStr(c, key)
			cfg.RateUnit = nexmark.RateUnit(s)
		case "isRateLimited":
			cfg.IsRateLimited, err = l.boolean(n, key)
		case "useWallclockEventTime":
			cfg.UseWallclockEventTime, err = l.boolean(n, key)
		default:
			var v int64
			if v, err = l.integer(n, key); err != nil {
				break
			}
			if p, ok := ints[key]; ok {
				*p = v
			} else if p, ok := smallInts[key]; ok {
				if v < 0 || v > 1<<31-1 {
					return nil, l.errf(n, "%s %d is out of range", key, v)
				}
				*p = int(v)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	src, err := nexmark.NewSource(cfg)
	if err != nil {
		return nil, l.errf(t.typNode, "Nexmark config: %v", err)
	}
	schemas := newNexmarkSchemas()
	out := weir.Read[*rowT](l.root, t.name, &nexmarkRows{src: src, schemas: schemas}, src.Bounded(),
		stepOpts(t, weir.WithCoder(schemas.event.Coder()), weir.WithSourceIdentity("nexmark", t.name, src.Bounded()))...)
	return rowsColl(schemas.event, out), nil
}

// nexmarkRows is the Nexmark source with its events as rows.
type nexmarkRows struct {
	src     *nexmark.Source
	schemas *nexmarkSchemas
}

func (s *nexmarkRows) Split(ctx context.Context, n int) ([]contract.SourceSplit, error) {
	splits, err := s.src.Split(ctx, n)
	return s.wrap(splits), err
}

func (s *nexmarkRows) Resume(ctx context.Context, positions [][]byte) ([]contract.SourceSplit, error) {
	splits, err := s.src.Resume(ctx, positions)
	return s.wrap(splits), err
}

func (s *nexmarkRows) wrap(splits []contract.SourceSplit) []contract.SourceSplit {
	out := make([]contract.SourceSplit, len(splits))
	for i, sp := range splits {
		out[i] = &nexmarkRowSplit{PositionedSplit: sp.(contract.PositionedSplit), schemas: s.schemas}
	}
	return out
}

// nexmarkRowSplit converts the events a Nexmark split reads to rows.
type nexmarkRowSplit struct {
	contract.PositionedSplit
	schemas *nexmarkSchemas
}

func (s *nexmarkRowSplit) Read(ctx context.Context, buf []contract.Element) (contract.ReadResult, error) {
	res, err := s.PositionedSplit.Read(ctx, buf)
	for i := range buf[:res.N] {
		ev, ok := buf[i].Value.(nexmark.Event)
		if !ok {
			return res, fmt.Errorf("nexmark source gave a %T, not an event", buf[i].Value)
		}
		buf[i].Value = s.schemas.row(ev)
	}
	return res, err
}
