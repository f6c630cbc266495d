package nexmarkrow

import (
	"context"
	"fmt"

	"github.com/weir-dev/weir/nexmark"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// Nexmark row schemas: an event row has the nested rows newPerson,
// newAuction and bid (Beam's Event fields), exactly one of them non-null,
// and eventType, which says which: "PERSON", "AUCTION" or "BID" (Beam's
// Event.Type; a filter tests it, as CEL cannot compare a row with null).
// schemas holds the schemas of one Nexmark source's rows.
type schemas struct {
	event, person, auction, bid *row.Schema
}

func newSchemas() *schemas {
	s := &schemas{}
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

// eventRow is an event row and its nested row's values V in one
// allocation, of as many values as the event's kind has: 208 bytes for a
// bid, which most events are, 288 for an auction, 256 for a person.
type eventRow[V any] struct {
	outer  row.Row
	ov     [4]any
	inner  row.Row
	values V
}

// outer makes *r the event row of kind, with ov its values and nested at
// index slot (the nested rows' fields start at 1).
func (s *schemas) outer(r *row.Row, ov *[4]any, kind string, slot int, nested *row.Row) *row.Row {
	ov[0], ov[slot] = kind, nested
	*r = row.Row{Schema: s.event, Values: ov[:]}
	return r
}

// row returns the row of e.
func (s *schemas) row(e nexmark.Event) *row.Row {
	switch {
	case e.Bid != nil:
		b := e.Bid
		nr := &eventRow[[5]any]{values: [5]any{b.Auction, b.Bidder, b.Price, b.DateTime, b.Extra}}
		nr.inner = row.Row{Schema: s.bid, Values: nr.values[:]}
		return s.outer(&nr.outer, &nr.ov, kindBid, 3, &nr.inner)
	case e.Auction != nil:
		a := e.Auction
		nr := &eventRow[[10]any]{values: [10]any{a.ID, a.ItemName, a.Description, a.InitialBid, a.Reserve, a.DateTime, a.Expires, a.Seller, a.Category, a.Extra}}
		nr.inner = row.Row{Schema: s.auction, Values: nr.values[:]}
		return s.outer(&nr.outer, &nr.ov, kindAuction, 2, &nr.inner)
	case e.Person != nil:
		p := e.Person
		nr := &eventRow[[8]any]{values: [8]any{p.ID, p.Name, p.EmailAddress, p.CreditCard, p.City, p.State, p.DateTime, p.Extra}}
		nr.inner = row.Row{Schema: s.person, Values: nr.values[:]}
		return s.outer(&nr.outer, &nr.ov, kindPerson, 1, &nr.inner)
	}
	return &row.Row{Schema: s.event, Values: make([]any, 4)}
}

// NewSource returns src with its events as rows of EventSchema.
func NewSource(src *nexmark.Source) *Source {
	return &Source{src: src, schemas: newSchemas()}
}

// EventSchema is the schema of the source's rows.
func (s *Source) EventSchema() *row.Schema { return s.schemas.event }

// Source is the Nexmark source with its events as rows.
type Source struct {
	src     *nexmark.Source
	schemas *schemas
}

// Split implements contract.Source.
func (s *Source) Split(ctx context.Context, n int) ([]contract.SourceSplit, error) {
	splits, err := s.src.Split(ctx, n)
	return s.wrap(splits), err
}

// Resume implements contract.ResumableSource.
func (s *Source) Resume(ctx context.Context, positions [][]byte) ([]contract.SourceSplit, error) {
	splits, err := s.src.Resume(ctx, positions)
	return s.wrap(splits), err
}

func (s *Source) wrap(splits []contract.SourceSplit) []contract.SourceSplit {
	out := make([]contract.SourceSplit, len(splits))
	for i, sp := range splits {
		out[i] = &rowSplit{PositionedSplit: sp.(contract.PositionedSplit), schemas: s.schemas}
	}
	return out
}

// rowSplit converts the events a Nexmark split reads to rows.
type rowSplit struct {
	contract.PositionedSplit
	schemas *schemas
}

// Read implements contract.SourceSplit.
func (s *rowSplit) Read(ctx context.Context, buf []contract.Element) (contract.ReadResult, error) {
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
