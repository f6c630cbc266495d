package nexmark

import (
	"fmt"

	"github.com/weir-dev/weir/mtime"
)

// Person is a new user of the auction site. Field names follow Beam's
// Nexmark model (org.apache.beam.sdk.nexmark.model.Person).
type Person struct {
	ID           int64      `json:"id"`
	Name         string     `json:"name"`
	EmailAddress string     `json:"emailAddress"`
	CreditCard   string     `json:"creditCard"`
	City         string     `json:"city"`
	State        string     `json:"state"`
	DateTime     mtime.Time `json:"dateTime"`
	Extra        string     `json:"extra"`
}

// Auction is a new item put up for auction.
type Auction struct {
	ID          int64      `json:"id"`
	ItemName    string     `json:"itemName"`
	Description string     `json:"description"`
	InitialBid  int64      `json:"initialBid"`
	Reserve     int64      `json:"reserve"`
	DateTime    mtime.Time `json:"dateTime"`
	Expires     mtime.Time `json:"expires"`
	Seller      int64      `json:"seller"`
	Category    int64      `json:"category"`
	Extra       string     `json:"extra"`
}

// Bid is a bid on an auction.
type Bid struct {
	Auction  int64      `json:"auction"`
	Bidder   int64      `json:"bidder"`
	Price    int64      `json:"price"`
	DateTime mtime.Time `json:"dateTime"`
	Extra    string     `json:"extra"`
}

// Kind says which of Person, Auction and Bid an Event holds.
type Kind uint8

// The kinds of events.
const (
	KindPerson Kind = iota
	KindAuction
	KindBid
)

// String returns the kind's name as Beam's Event.Type spells it.
func (k Kind) String() string {
	switch k {
	case KindPerson:
		return "PERSON"
	case KindAuction:
		return "AUCTION"
	case KindBid:
		return "BID"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Event is one element of the Nexmark stream: exactly one of Person,
// Auction and Bid is set. Events are immutable once generated.
type Event struct {
	Person  *Person  `json:"newPerson,omitempty"`
	Auction *Auction `json:"newAuction,omitempty"`
	Bid     *Bid     `json:"bid,omitempty"`
}

// Kind returns which record e holds.
func (e Event) Kind() Kind {
	switch {
	case e.Person != nil:
		return KindPerson
	case e.Auction != nil:
		return KindAuction
	default:
		return KindBid
	}
}

// Time returns the event time of the record e holds.
func (e Event) Time() mtime.Time {
	switch {
	case e.Person != nil:
		return e.Person.DateTime
	case e.Auction != nil:
		return e.Auction.DateTime
	case e.Bid != nil:
		return e.Bid.DateTime
	}
	return mtime.MinTimestamp
}
