package nexmarkrow

import (
	"testing"
	"unsafe"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/nexmark"
	"github.com/weir-dev/weir/row"
)

// TestEventRows checks each kind of event's row: its eventType, its
// nested row's fields by name, and the other kinds' rows null.
func TestEventRows(t *testing.T) {
	at := mtime.Time(nexmark.BaseTime)
	s := newSchemas()
	tests := []struct {
		ev     nexmark.Event
		kind   string
		nested string
		want   map[string]any
	}{
		{nexmark.Event{Bid: &nexmark.Bid{Auction: 1001, Bidder: 2002, Price: 303, DateTime: at, Extra: "x"}}, kindBid, "bid",
			map[string]any{"auction": int64(1001), "bidder": int64(2002), "price": int64(303), "dateTime": at, "extra": "x"}},
		{nexmark.Event{Auction: &nexmark.Auction{ID: 1000, ItemName: "i", Description: "d", InitialBid: 5, Reserve: 9, DateTime: at, Expires: at + 10, Seller: 1001, Category: 10, Extra: "e"}}, kindAuction, "newAuction",
			map[string]any{"id": int64(1000), "itemName": "i", "description": "d", "initialBid": int64(5), "reserve": int64(9), "dateTime": at, "expires": at + 10, "seller": int64(1001), "category": int64(10), "extra": "e"}},
		{nexmark.Event{Person: &nexmark.Person{ID: 1000, Name: "n", EmailAddress: "m", CreditCard: "c", City: "ci", State: "OR", DateTime: at, Extra: "p"}}, kindPerson, "newPerson",
			map[string]any{"id": int64(1000), "name": "n", "emailAddress": "m", "creditCard": "c", "city": "ci", "state": "OR", "dateTime": at, "extra": "p"}},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			r := s.row(tc.ev)
			if r.Schema != s.event {
				t.Fatalf("schema %s, want the event schema", r.Schema)
			}
			if k, _ := r.Get("eventType"); k != tc.kind {
				t.Errorf("eventType %v, want %s", k, tc.kind)
			}
			for _, f := range []string{"newPerson", "newAuction", "bid"} {
				v, _ := r.Get(f)
				if (v != nil) != (f == tc.nested) {
					t.Errorf("%s = %v", f, v)
				}
			}
			v, _ := r.Get(tc.nested)
			nested, ok := v.(*row.Row)
			if !ok {
				t.Fatalf("%s is a %T, not a row", tc.nested, v)
			}
			if len(nested.Values) != len(nested.Schema.Fields) || len(nested.Values) != len(tc.want) {
				t.Errorf("%d values for %d fields, want %d", len(nested.Values), len(nested.Schema.Fields), len(tc.want))
			}
			for name, want := range tc.want {
				if got, _ := nested.Get(name); got != want {
					t.Errorf("%s.%s = %v, want %v", tc.nested, name, got, want)
				}
			}
		})
	}
}

// TestBidRowSize pins the size of a bid's row, most of a Nexmark stream's
// allocation: 208 bytes, not the 288 of a row sized for an auction.
func TestBidRowSize(t *testing.T) {
	if n := unsafe.Sizeof(eventRow[[5]any]{}); n != 208 {
		t.Errorf("a bid's row is %d bytes, want 208", n)
	}
}
