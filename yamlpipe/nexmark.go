package yamlpipe

import (
	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/nexmark"
	"github.com/weir-dev/weir/yamlpipe/nexmarkrow"
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
		n := c.Get(key)
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
	rows := nexmarkrow.NewSource(src)
	event := rows.EventSchema()
	out := weir.Read[*rowT](l.root, t.name, rows, src.Bounded(),
		stepOpts(t, weir.WithCoder(event.Coder()), weir.WithSourceIdentity("nexmark", t.name, src.Bounded()))...)
	return rowsColl(event, out), nil
}
