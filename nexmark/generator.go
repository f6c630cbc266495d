package nexmark

import (
	"fmt"
	"math"
	"strings"

	"github.com/weir-dev/weir/mtime"
)

// Generator computes the events of a configuration. Event number n (the
// n'th event of the stream, from 0) is a pure function of the
// configuration, the base time and n, as in Beam's Generator: its id is its
// position after the out-of-order shuffle, its fields are drawn from a
// java.util.Random seeded with that id (and Config.Seed), and its event time
// follows the configured rate. So any set of event numbers can be generated
// independently, by any split, in any order. A Generator is immutable and
// safe for concurrent use.
type Generator struct {
	cfg      Config
	baseTime int64 // ms
	delays   []int64
	stepSec  int64
	// Derived when the rate changes over time (len(delays) > 1): the
	// length of one cycle through every delay, in events and in ms.
	eventsPerEpoch int64
	epochPeriodMs  int64
	seedMix        int64
}

// NewGenerator returns the generator of cfg (defaults applied) whose first
// event is at baseTime (BaseTime unless the configuration uses wall-clock
// event time).
func NewGenerator(cfg Config, baseTime mtime.Time) (*Generator, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Generator{cfg: cfg, baseTime: int64(baseTime), delays: cfg.interEventDelayUs(), stepSec: cfg.stepLengthSec()}
	if len(g.delays) > 1 {
		for _, d := range g.delays {
			n := g.stepSec * 1_000_000 / d
			g.eventsPerEpoch += n
			g.epochPeriodMs += n * d / 1000
		}
		if g.eventsPerEpoch == 0 {
			return nil, fmt.Errorf("nexmark config: ratePeriodSec %d is too short for rates %d and %d", cfg.RatePeriodSec, cfg.FirstEventRate, cfg.NextEventRate)
		}
	}
	if cfg.Seed != 0 {
		// An odd multiplier spreads consecutive seeds over the id space.
		g.seedMix = cfg.Seed * -7046029254386353131
	}
	return g, nil
}

// Config returns the generator's configuration, defaults applied.
func (g *Generator) Config() Config { return g.cfg }

// timestamp returns the event time of event number n, in ms.
func (g *Generator) timestamp(n int64) int64 {
	if len(g.delays) == 1 {
		return g.baseTime + n*g.delays[0]/1000
	}
	epoch := n / g.eventsPerEpoch
	n %= g.eventsPerEpoch
	offsetMs := int64(0)
	for _, d := range g.delays {
		cycle := g.stepSec * 1_000_000 / d
		if n < cycle {
			return g.baseTime + epoch*g.epochPeriodMs + offsetMs + n*d/1000
		}
		n -= cycle
		offsetMs += cycle * d / 1000
	}
	// Unreachable: n < eventsPerEpoch, the sum of the cycles.
	return g.baseTime + epoch*g.epochPeriodMs + offsetMs
}

// adjusted returns the event number that event n takes after the
// out-of-order shuffle within its group (Beam's nextAdjustedEventNumber).
func (g *Generator) adjusted(n int64) int64 {
	size := g.cfg.OutOfOrderGroupSize
	return n/size*size + (n*953)%size
}

// Watermark returns an event time no event numbered next or later has
// an earlier time than (Beam's nextEventNumberForWatermark).
func (g *Generator) Watermark(next int64) mtime.Time {
	size := g.cfg.OutOfOrderGroupSize
	return mtime.Time(g.timestamp(next / size * size))
}

// ID returns the event id of event number n: it decides whether the event
// is a person, an auction or a bid, and seeds its random draws.
func (g *Generator) ID(n int64) int64 { return g.adjusted(n) }

// Event returns event number n and its event time.
func (g *Generator) Event(n int64) (Event, mtime.Time) {
	adj := g.adjusted(n)
	id := adj
	ts := g.timestamp(adj)
	rnd := newJavaRandom(id ^ g.seedMix)
	switch rem := id % ProportionDenominator; {
	case rem < PersonProportion:
		return Event{Person: g.person(id, &rnd, ts)}, mtime.Time(ts)
	case rem < PersonProportion+AuctionProportion:
		return Event{Auction: g.auction(adj, id, &rnd, ts)}, mtime.Time(ts)
	default:
		return Event{Bid: g.bid(id, &rnd, ts)}, mtime.Time(ts)
	}
}

// Generate returns events [from, to) in order; for tests and models.
func (g *Generator) Generate(from, to int64) []Event {
	out := make([]Event, 0, max(to-from, 0))
	for n := from; n < to; n++ {
		e, _ := g.Event(n)
		out = append(out, e)
	}
	return out
}

// ---- people ----

// The people generator's constants, as in Beam's PersonGenerator.
const personIDLead = 10

var (
	usStates   = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities   = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames  = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
)

func (g *Generator) person(id int64, rnd *javaRandom, ts int64) *Person {
	p := &Person{ID: lastBase0PersonID(id) + FirstPersonID, DateTime: mtime.Time(ts)}
	p.Name = firstNames[rnd.nextInt(int32(len(firstNames)))] + " " + lastNames[rnd.nextInt(int32(len(lastNames)))]
	p.EmailAddress = nextString(rnd, 7) + "@" + nextString(rnd, 5) + ".com"
	var cc strings.Builder
	cc.Grow(19)
	for i := 0; i < 4; i++ {
		if i > 0 {
			cc.WriteByte(' ')
		}
		fmt.Fprintf(&cc, "%04d", rnd.nextInt(10000))
	}
	p.CreditCard = cc.String()
	p.City = usCities[rnd.nextInt(int32(len(usCities)))]
	p.State = usStates[rnd.nextInt(int32(len(usStates)))]
	size := 8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State)
	p.Extra = nextExtra(rnd, size, g.cfg.AvgPersonByteSize)
	return p
}

// lastBase0PersonID is the id (from 0) of the last person generated at or
// before event id.
func lastBase0PersonID(id int64) int64 {
	epoch, offset := id/ProportionDenominator, id%ProportionDenominator
	if offset >= PersonProportion {
		offset = PersonProportion - 1
	}
	return epoch*PersonProportion + offset
}

// nextBase0PersonID picks one of the active people, or one a few ids
// ahead (a person whose event comes later).
func (g *Generator) nextBase0PersonID(id int64, rnd *javaRandom) int64 {
	numPeople := lastBase0PersonID(id) + 1
	active := min(numPeople, int64(g.cfg.NumActivePeople))
	return numPeople - active + nextLong(rnd, active+personIDLead)
}

// ---- auctions ----

// The auction generator's constants, as in Beam's AuctionGenerator.
const (
	numCategories  = 5
	auctionIDLead  = 10
	hotSellerRatio = 100
)

func (g *Generator) auction(eventNumber, id int64, rnd *javaRandom, ts int64) *Auction {
	a := &Auction{ID: lastBase0AuctionID(id) + FirstAuctionID, DateTime: mtime.Time(ts)}
	if rnd.nextInt(int32(g.cfg.HotSellersRatio)) > 0 {
		// The first person of the last hotSellerRatio people.
		a.Seller = lastBase0PersonID(id) / hotSellerRatio * hotSellerRatio
	} else {
		a.Seller = g.nextBase0PersonID(id, rnd)
	}
	a.Seller += FirstPersonID
	a.Category = FirstCategoryID + int64(rnd.nextInt(numCategories))
	a.InitialBid = nextPrice(rnd)
	a.Expires = mtime.Time(ts + g.nextAuctionLengthMs(eventNumber, rnd, ts))
	a.ItemName = nextString(rnd, 20)
	a.Description = nextString(rnd, 100)
	a.Reserve = a.InitialBid + nextPrice(rnd)
	size := 8 + len(a.ItemName) + len(a.Description) + 8 + 8 + 8 + 8 + 8
	a.Extra = nextExtra(rnd, size, g.cfg.AvgAuctionByteSize)
	return a
}

// lastBase0AuctionID is the id (from 0) of the last auction generated at
// or before event id.
func lastBase0AuctionID(id int64) int64 {
	epoch, offset := id/ProportionDenominator, id%ProportionDenominator
	switch {
	case offset < PersonProportion:
		epoch--
		offset = AuctionProportion - 1
	case offset >= PersonProportion+AuctionProportion:
		offset = AuctionProportion - 1
	default:
		offset -= PersonProportion
	}
	return epoch*AuctionProportion + offset
}

// nextBase0AuctionID picks one of the auctions likely still in flight, or
// one a few ids ahead.
func (g *Generator) nextBase0AuctionID(id int64, rnd *javaRandom) int64 {
	maxAuction := lastBase0AuctionID(id)
	minAuction := max(maxAuction-int64(g.cfg.NumInFlightAuctions), 0)
	return minAuction + nextLong(rnd, maxAuction-minAuction+1+auctionIDLead)
}

// nextAuctionLengthMs draws an auction's length: on average the time until
// NumInFlightAuctions more auctions have been generated.
func (g *Generator) nextAuctionLengthMs(eventNumber int64, rnd *javaRandom, ts int64) int64 {
	ahead := int64(g.cfg.NumInFlightAuctions) * ProportionDenominator / AuctionProportion
	horizon := g.timestamp(eventNumber+ahead) - ts
	return 1 + nextLong(rnd, max(horizon*2, 1))
}

// ---- bids ----

// The bid generator's constants, as in Beam's BidGenerator.
const (
	hotAuctionRatio = 100
	hotBidderRatio  = 100
)

func (g *Generator) bid(id int64, rnd *javaRandom, ts int64) *Bid {
	b := &Bid{DateTime: mtime.Time(ts)}
	if rnd.nextInt(int32(g.cfg.HotAuctionRatio)) > 0 {
		// The first auction of the last hotAuctionRatio auctions.
		b.Auction = lastBase0AuctionID(id) / hotAuctionRatio * hotAuctionRatio
	} else {
		b.Auction = g.nextBase0AuctionID(id, rnd)
	}
	b.Auction += FirstAuctionID
	if rnd.nextInt(int32(g.cfg.HotBiddersRatio)) > 0 {
		// The second person of the last hotBidderRatio people, so hot
		// bidders and hot sellers differ.
		b.Bidder = lastBase0PersonID(id)/hotBidderRatio*hotBidderRatio + 1
	} else {
		b.Bidder = g.nextBase0PersonID(id, rnd)
	}
	b.Bidder += FirstPersonID
	b.Price = nextPrice(rnd)
	b.Extra = nextExtra(rnd, 8+8+8+8, g.cfg.AvgBidByteSize)
	return b
}

// ---- values ----

// nextLong returns a value in [0, n), as Beam's LongGenerator (skewed when
// n does not fit an int32, as there).
func nextLong(rnd *javaRandom, n int64) int64 {
	if n < 1<<31-1 {
		return int64(rnd.nextInt(int32(n)))
	}
	v := rnd.nextLong() % n
	if v < 0 {
		v = -v
	}
	return v
}

// nextPrice returns a price in cents, log-uniform between 1 and 1,000,000
// dollars.
func nextPrice(rnd *javaRandom) int64 {
	return javaRound(math.Pow(10, rnd.nextDouble()*6) * 100)
}

const minStringLength = 3

// nextString returns a random string of lower-case letters and spaces of
// up to maxLength characters, trimmed.
func nextString(rnd *javaRandom, maxLength int32) string {
	n := minStringLength + rnd.nextInt(maxLength-minStringLength)
	b := make([]byte, 0, n)
	for ; n > 0; n-- {
		if rnd.nextInt(13) == 0 {
			b = append(b, ' ')
		} else {
			b = append(b, byte('a'+rnd.nextInt(26)))
		}
	}
	return strings.TrimSpace(string(b))
}

// nextExactString returns a random string of exactly n characters.
func nextExactString(rnd *javaRandom, n int) string {
	var b strings.Builder
	b.Grow(n)
	var r int32
	left := 0
	for i := 0; i < n; i++ {
		if left == 0 {
			r = rnd.nextInt32()
			left = 6 // log_26(2^31)
		}
		// As in Java, a negative r gives characters just below 'a'.
		b.WriteByte(byte('a' + r%26))
		r /= 26
		left--
	}
	return b.String()
}

// nextExtra returns padding so that size plus its length averages avg.
func nextExtra(rnd *javaRandom, size, avg int) string {
	if size > avg {
		return ""
	}
	avg -= size
	delta := int(javaRound(float64(avg) * 0.2))
	n := avg - delta
	if delta != 0 {
		n += int(rnd.nextInt(int32(2 * delta)))
	}
	return nextExactString(rnd, n)
}
