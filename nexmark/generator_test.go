package nexmark

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
)

// TestJavaRandom pins the generator to java.util.Random's sequence: the
// values are those a JVM gives for these seeds.
func TestJavaRandom(t *testing.T) {
	tests := []struct {
		name string
		seed int64
		draw func(r *javaRandom) any
		want any
	}{
		{"nextInt seed 42", 42, func(r *javaRandom) any { return r.nextInt32() }, int32(-1170105035)},
		{"nextInt seed 0", 0, func(r *javaRandom) any { return r.nextInt32() }, int32(-1155484576)},
		{"nextLong seed 0", 0, func(r *javaRandom) any { return r.nextLong() }, int64(-4962768465676381896)},
		{"nextDouble seed 42", 42, func(r *javaRandom) any { return r.nextDouble() }, 0.7275636800328681},
		{"nextDouble seed 0", 0, func(r *javaRandom) any { return r.nextDouble() }, 0.730967787376657},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newJavaRandom(tt.seed)
			if got := tt.draw(&r); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	// nextInt(bound) stays in range, for powers of two and others.
	r := newJavaRandom(7)
	for _, bound := range []int32{1, 2, 3, 13, 16, 26, 1000, 1 << 30, 1<<31 - 1} {
		for i := 0; i < 1000; i++ {
			if v := r.nextInt(bound); v < 0 || v >= bound {
				t.Fatalf("nextInt(%d) = %d", bound, v)
			}
		}
	}
}

func mustGenerator(t *testing.T, cfg Config) *Generator {
	t.Helper()
	g, err := NewGenerator(cfg, BaseTime)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestProportionsAndIDs(t *testing.T) {
	for _, seed := range []int64{0, 1, 99} {
		g := mustGenerator(t, Config{Seed: seed})
		const n = 50_000
		var persons, auctions, bids int64
		lastPerson, lastAuction := int64(FirstPersonID-1), int64(FirstAuctionID-1)
		hotBids := 0
		for i := int64(0); i < n; i++ {
			e, ts := g.Event(i)
			if e.Time() != ts {
				t.Fatalf("event %d: record time %v, element time %v", i, e.Time(), ts)
			}
			switch e.Kind() {
			case KindPerson:
				if e.Person.ID != FirstPersonID+persons {
					t.Fatalf("seed %d: person %d has id %d, want %d", seed, persons, e.Person.ID, FirstPersonID+persons)
				}
				if !strings.Contains(e.Person.EmailAddress, "@") || len(e.Person.CreditCard) != 19 {
					t.Fatalf("person %+v: malformed fields", e.Person)
				}
				persons++
				lastPerson = e.Person.ID
			case KindAuction:
				a := e.Auction
				if a.ID != FirstAuctionID+auctions {
					t.Fatalf("seed %d: auction %d has id %d", seed, auctions, a.ID)
				}
				if a.Category < FirstCategoryID || a.Category >= FirstCategoryID+numCategories {
					t.Fatalf("auction %d: category %d", a.ID, a.Category)
				}
				if a.Expires <= a.DateTime || a.Reserve < a.InitialBid || a.InitialBid < 100 {
					t.Fatalf("auction %+v: expiry, reserve or initial bid out of range", a)
				}
				if a.Seller < FirstPersonID || a.Seller > lastPerson+personIDLead {
					t.Fatalf("auction %d: seller %d beyond the last person %d and its lead", a.ID, a.Seller, lastPerson)
				}
				auctions++
				lastAuction = a.ID
			case KindBid:
				b := e.Bid
				if b.Auction < FirstAuctionID || b.Auction > lastAuction+auctionIDLead {
					t.Fatalf("bid %d: auction %d beyond the last auction %d and its lead", i, b.Auction, lastAuction)
				}
				if b.Bidder < FirstPersonID || b.Bidder > lastPerson+personIDLead {
					t.Fatalf("bid %d: bidder %d beyond the last person %d and its lead", i, b.Bidder, lastPerson)
				}
				if b.Price < 100 || b.Price > 100_000_000 {
					t.Fatalf("bid %d: price %d", i, b.Price)
				}
				if (b.Auction-FirstAuctionID)%hotAuctionRatio == 0 {
					hotBids++
				}
				bids++
			}
		}
		if persons != n/50*PersonProportion || auctions != n/50*AuctionProportion || bids != n/50*BidProportion {
			t.Errorf("seed %d: %d persons, %d auctions, %d bids in %d events; want 1:3:46", seed, persons, auctions, bids, n)
		}
		// hotAuctionRatio 2: about half the bids go to the hot auction (a
		// few more, as random auctions can be hot too; a few less with
		// seed 0, as java.util.Random's first draw from consecutive seeds
		// is not quite uniform, in Beam too).
		if f := float64(hotBids) / float64(bids); f < 0.45 || f > 0.56 {
			t.Errorf("seed %d: %.3f of bids are for hot auctions, want about 0.5", seed, f)
		}
	}
}

func TestEventTimesFollowTheRate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		n    int64
		want mtime.Time
	}{
		{"default 10000/s", Config{}, 10_000, BaseTime + 1000},
		{"1000/s", Config{FirstEventRate: 1000}, 500, BaseTime + 500},
		{"per minute", Config{FirstEventRate: 60, RateUnit: PerMinute}, 30, BaseTime + 30_000},
		{"two generators halve each timeline's rate", Config{FirstEventRate: 1000, NumEventGenerators: 2}, 500, BaseTime + 1000},
		// Square: 100/s for 5 s (500 events), then 1000/s.
		{"square, second step", Config{FirstEventRate: 100, NextEventRate: 1000, RateShape: RateShapeSquare, RatePeriodSec: 10}, 600, BaseTime + 5000 + 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustGenerator(t, tt.cfg)
			if _, got := g.Event(tt.n); got != tt.want {
				t.Errorf("event %d at %v, want %v", tt.n, got, tt.want)
			}
			prev := mtime.MinTimestamp
			for i := int64(0); i < 2000; i++ {
				_, ts := g.Event(i)
				if ts < prev {
					t.Fatalf("event %d at %v before event %d at %v (in-order configuration)", i, ts, i-1, prev)
				}
				prev = ts
			}
		})
	}
}

func TestDeterminismBySeed(t *testing.T) {
	a := mustGenerator(t, Config{Seed: 5}).Generate(0, 2000)
	b := mustGenerator(t, Config{Seed: 5}).Generate(0, 2000)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two generators of the same seed differ")
	}
	c := mustGenerator(t, Config{Seed: 6}).Generate(0, 2000)
	if reflect.DeepEqual(a, c) {
		t.Fatal("seeds 5 and 6 give the same events")
	}
	// Out of order, a generator can start anywhere: event 1234 is the same
	// whether generated first or after the others.
	g := mustGenerator(t, Config{Seed: 5})
	if e, _ := g.Event(1234); !reflect.DeepEqual(e, a[1234]) {
		t.Fatal("event 1234 depends on what was generated before it")
	}
}

func TestOutOfOrderGroups(t *testing.T) {
	const n, size = 20_000, 1000
	g := mustGenerator(t, Config{OutOfOrderGroupSize: size})
	seen := map[int64]bool{}
	inversions := 0
	prev := mtime.MinTimestamp
	for i := int64(0); i < n; i++ {
		id := g.ID(i)
		if id/size != i/size {
			t.Fatalf("event %d has id %d, outside its group", i, id)
		}
		if seen[id] {
			t.Fatalf("id %d generated twice", id)
		}
		seen[id] = true
		_, ts := g.Event(i)
		if ts < prev {
			inversions++
		}
		prev = ts
		if wm := g.Watermark(i); wm > ts {
			t.Fatalf("event %d at %v is behind the watermark %v given before it", i, ts, wm)
		}
	}
	if inversions == 0 {
		t.Error("an out-of-order configuration gave events in order")
	}
}

// readAll reads every split of src to its end and returns the events'
// ids per split.
func readAll(t *testing.T, splits []contract.SourceSplit) [][]Event {
	t.Helper()
	out := make([][]Event, len(splits))
	buf := make([]contract.Element, 97)
	for i, sp := range splits {
		last := mtime.MinTimestamp
		for {
			res, err := sp.Read(context.Background(), buf)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range buf[:res.N] {
				ev := e.Value.(Event)
				if e.Time < last {
					t.Fatalf("split %d: element at %v behind the watermark %v", i, e.Time, last)
				}
				out[i] = append(out[i], ev)
			}
			if res.Watermark < last {
				t.Fatalf("split %d: watermark went back from %v to %v", i, last, res.Watermark)
			}
			last = res.Watermark
			if res.Done {
				break
			}
		}
	}
	return out
}

func eventKey(e Event) string {
	switch e.Kind() {
	case KindPerson:
		return "p" + e.Person.Name + e.Person.Extra
	case KindAuction:
		return "a" + e.Auction.ItemName + e.Auction.Extra
	}
	return "b" + e.Bid.Extra
}

func TestSplitsShareOneStream(t *testing.T) {
	const n = 20_000
	src, err := NewSource(Config{NumEvents: n, Seed: 3, OutOfOrderGroupSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, e := range mustGenerator(t, src.Config()).Generate(0, n) {
		want[eventKey(e)]++
	}
	for _, workers := range []int{1, 2, 3, 8} {
		splits, err := src.Split(context.Background(), workers)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		total := 0
		personIDs := map[int64]int{}
		for i, evs := range readAll(t, splits) {
			for _, e := range evs {
				got[eventKey(e)]++
				total++
				if e.Person != nil {
					if j, dup := personIDs[e.Person.ID]; dup {
						t.Fatalf("%d workers: person %d generated by splits %d and %d", workers, e.Person.ID, j, i)
					}
					personIDs[e.Person.ID] = i
				}
			}
		}
		if total != n || !reflect.DeepEqual(got, want) {
			t.Errorf("%d workers: %d events, not the %d a single generator gives", workers, total, n)
		}
	}
}

func TestResumeContinuesEachSplit(t *testing.T) {
	src, err := NewSource(Config{NumEvents: 1000})
	if err != nil {
		t.Fatal(err)
	}
	splits, _ := src.Split(context.Background(), 2)
	buf := make([]contract.Element, 10)
	var positions [][]byte
	var firstPart []Event
	for _, sp := range splits {
		res, err := sp.Read(context.Background(), buf)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range buf[:res.N] {
			firstPart = append(firstPart, e.Value.(Event))
		}
		p, err := sp.(contract.PositionedSplit).Position()
		if err != nil {
			t.Fatal(err)
		}
		positions = append(positions, p)
	}
	resumed, err := src.Resume(context.Background(), positions)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, e := range mustGenerator(t, src.Config()).Generate(0, 1000) {
		want[eventKey(e)]++
	}
	got := map[string]int{}
	for _, evs := range append(readAll(t, resumed), firstPart) {
		for _, e := range evs {
			got[eventKey(e)]++
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read %d distinct events across a resume, want each of the %d once", len(got), len(want))
	}
	if _, err := src.Resume(context.Background(), [][]byte{{1, 2, 3}}); err == nil || !strings.Contains(err.Error(), "3 bytes") {
		t.Errorf("a short position gave %v, want an error naming its length", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"negative events", Config{NumEvents: -1}, "numEvents is -1"},
		{"bad shape", Config{RateShape: "TRIANGLE"}, `rateShape is "TRIANGLE"`},
		{"bad unit", Config{RateUnit: "PER_HOUR"}, `rateUnit is "PER_HOUR"`},
		{"negative ratio", Config{HotAuctionRatio: -2}, "hotAuctionRatio is -2"},
		{"window not a multiple", Config{WindowSizeSec: 10, WindowPeriodSec: 3}, "multiple of windowPeriodSec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewSource(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if _, err := NewSource(Config{}); err != nil {
		t.Errorf("the default configuration is refused: %v", err)
	}
}

func BenchmarkGenerator(b *testing.B) {
	g, err := NewGenerator(Config{}, BaseTime)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		g.Event(int64(i))
	}
}

// TestRateLimitedSourceFollowsTheClock: a rate-limited split emits the
// events whose time the clock has reached since it started, and no more.
func TestRateLimitedSourceFollowsTheClock(t *testing.T) {
	src, err := NewSource(Config{IsRateLimited: true, FirstEventRate: 1000})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	now := start
	src.now = func() time.Time { return now }
	splits, err := src.Split(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]contract.Element, 1000)
	read := func() int {
		res, err := splits[0].Read(context.Background(), buf)
		if err != nil {
			t.Fatal(err)
		}
		return res.N
	}
	steps := []struct {
		advance time.Duration
		want    int
	}{
		{0, 1},                    // event 0 is due at once
		{0, 0},                    // nothing more until the clock moves
		{5 * time.Millisecond, 5}, // 1000/s: events 1-5
		{100 * time.Millisecond, 100},
	}
	for i, st := range steps {
		now = now.Add(st.advance)
		if got := read(); got != st.want {
			t.Errorf("step %d (clock +%v): read %d events, want %d", i, now.Sub(start), got, st.want)
		}
	}
}

// TestRateLimitedWallclockSourceCatchesUp: with wall-clock event times, a
// split resumed after a pause emits at once every event that fell due
// during the pause, then follows the clock again.
func TestRateLimitedWallclockSourceCatchesUp(t *testing.T) {
	src, err := NewSource(Config{IsRateLimited: true, UseWallclockEventTime: true, FirstEventRate: 1000})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	src.now = func() time.Time { return now }
	ctx := context.Background()
	splits, err := src.Split(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]contract.Element, 1000)
	read := func(sp contract.SourceSplit) int {
		res, err := sp.Read(ctx, buf)
		if err != nil {
			t.Fatal(err)
		}
		return res.N
	}
	now = now.Add(10 * time.Millisecond)
	if got := read(splits[0]); got != 11 {
		t.Fatalf("first read: %d events, want 11 (events 0-10)", got)
	}
	pos, err := splits[0].(contract.PositionedSplit).Position()
	if err != nil {
		t.Fatal(err)
	}
	// Paused for 200 ms, then resumed from the position.
	now = now.Add(200 * time.Millisecond)
	resumed, err := src.Resume(ctx, [][]byte{pos})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		advance time.Duration
		want    int
	}{
		{0, 200},                  // events 11-210 fell due during the pause
		{0, 0},                    // nothing more until the clock moves
		{5 * time.Millisecond, 5}, // then the clock's pace again
	}
	for i, st := range steps {
		now = now.Add(st.advance)
		if got := read(resumed[0]); got != st.want {
			t.Errorf("step %d after the pause: read %d events, want %d", i, got, st.want)
		}
	}
}
