package nexmark

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/internal/box"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// Source is the Nexmark event source (a contract.ResumableSource): split
// i of n generates event numbers i, i+n, i+2n, ..., so the splits' ids are
// disjoint, their union is the stream one generator would give, and event
// time advances evenly across them. Bounded when Config.NumEvents > 0.
type Source struct {
	cfg Config
	// now is the wall clock, for UseWallclockEventTime and IsRateLimited.
	now func() time.Time
}

// NewSource returns the source of cfg (defaults applied), or the errors of
// its configuration.
func NewSource(cfg Config) (*Source, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Source{cfg: cfg, now: time.Now}, nil
}

// Config returns the source's configuration, defaults applied.
func (s *Source) Config() Config { return s.cfg }

// Bounded reports whether the source ends.
func (s *Source) Bounded() bool { return s.cfg.NumEvents > 0 }

func (s *Source) baseTime() mtime.Time {
	if s.cfg.UseWallclockEventTime {
		return mtime.FromTime(s.now())
	}
	return BaseTime
}

// Split returns n splits sharing one timeline.
func (s *Source) Split(ctx context.Context, n int) ([]contract.SourceSplit, error) {
	if n < 1 {
		n = 1
	}
	return s.Resume(ctx, make([][]byte, n))
}

// positionLen is the length of a split's position: the next event number
// and the base time, 8 bytes each, big-endian.
const positionLen = 16

// Resume continues split i of len(positions) from the event number its
// position names; a nil position starts the split afresh. The base time
// is kept in the positions, so a resumed wall-clock stream keeps its times.
func (s *Source) Resume(_ context.Context, positions [][]byte) ([]contract.SourceSplit, error) {
	n := len(positions)
	if n == 0 {
		return nil, fmt.Errorf("nexmark source: resume needs at least one position")
	}
	base := s.baseTime()
	for i, p := range positions {
		if p == nil {
			continue
		}
		if len(p) != positionLen {
			return nil, fmt.Errorf("nexmark source: checkpointed position of split %d is %d bytes, want %d", i, len(p), positionLen)
		}
		base = mtime.Time(binary.BigEndian.Uint64(p[8:]))
	}
	gen, err := NewGenerator(s.cfg, base)
	if err != nil {
		return nil, err
	}
	splits := make([]contract.SourceSplit, n)
	start := s.now()
	for i, p := range positions {
		sp := &split{gen: gen, base: base, next: int64(i), stride: int64(n), limit: s.cfg.NumEvents, start: start, now: s.now, box: box.New[Event]()}
		if p != nil {
			sp.next = int64(binary.BigEndian.Uint64(p[:8]))
			if sp.next < 0 || sp.next%sp.stride != int64(i) {
				return nil, fmt.Errorf("nexmark source: checkpointed position of split %d names event %d, which split %d of %d does not generate", i, sp.next, i, n)
			}
		}
		sp.first = sp.next
		splits[i] = sp
	}
	return splits, nil
}

type split struct {
	gen    *Generator
	base   mtime.Time
	next   int64 // the next event number this split generates
	first  int64 // next when the split started, for rate limiting
	stride int64
	limit  int64 // NumEvents; 0 for unbounded
	start  time.Time
	now    func() time.Time
	box    *box.Boxer[Event]
}

// maxRateLimitedBatch bounds a rate-limited Read to the events due within
// this much event time, so that pacing stays smooth.
const maxRateLimitedBatch = 10 * time.Millisecond

func (s *split) Read(ctx context.Context, buf []contract.Element) (contract.ReadResult, error) {
	if s.limit > 0 && s.next >= s.limit {
		return contract.ReadResult{Watermark: mtime.MaxTimestamp, Done: true}, nil
	}
	var horizon mtime.Time = mtime.MaxTimestamp
	if s.gen.cfg.IsRateLimited {
		if s.gen.cfg.UseWallclockEventTime {
			// Event times are wall-clock times: emit an event once the
			// clock has reached its time. A split resumed after a pause
			// (an update, a rescale, a restart) emits what fell due
			// meanwhile at once, as a real source's backlog would (and as
			// Beam's generator does with its wall-clock base).
			horizon = mtime.FromTime(s.now())
		} else {
			// Emit an event once the wall clock has advanced, since the
			// split started, as far as its event time has since the
			// split's first.
			firstTime := s.gen.timestamp(s.gen.adjusted(s.first))
			elapsed := s.now().Sub(s.start)
			horizon = mtime.Time(firstTime) + mtime.Time(elapsed/time.Millisecond)
		}
		if ts := mtime.Time(s.gen.timestamp(s.gen.adjusted(s.next))); ts > horizon {
			wait := time.Duration(ts-horizon) * time.Millisecond
			wait = min(wait, maxRateLimitedBatch)
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return contract.ReadResult{}, ctx.Err()
			case <-t.C:
			}
			return contract.ReadResult{Watermark: s.gen.Watermark(s.next)}, nil
		}
	}
	n := 0
	for n < len(buf) && (s.limit == 0 || s.next < s.limit) {
		ev, ts := s.gen.Event(s.next)
		if ts > horizon {
			break
		}
		buf[n] = contract.Element{Value: s.box.Box(ev), Time: ts, Window: window.Global, Pane: window.NoFiring}
		n++
		s.next += s.stride
	}
	if s.limit > 0 && s.next >= s.limit {
		return contract.ReadResult{N: n, Watermark: mtime.MaxTimestamp, Done: true}, nil
	}
	return contract.ReadResult{N: n, Watermark: s.gen.Watermark(s.next)}, nil
}

func (s *split) Close() error { return nil }

// Position returns the next event number and the base time.
func (s *split) Position() ([]byte, error) {
	b := make([]byte, 0, positionLen)
	b = binary.BigEndian.AppendUint64(b, uint64(s.next))
	return binary.BigEndian.AppendUint64(b, uint64(s.base)), nil
}

// Ack does nothing: generated events need no acknowledgement.
func (s *split) Ack(context.Context, []byte) error { return nil }

// Read adds a Nexmark source step to the pipeline: the events of cfg,
// bounded when cfg.NumEvents > 0. It returns the errors of a bad
// configuration instead of adding the step.
func Read(s weir.Scope, name string, cfg Config) (weir.PCollection[Event], error) {
	src, err := NewSource(cfg)
	if err != nil {
		return weir.PCollection[Event]{}, fmt.Errorf("step %q: %w", name, err)
	}
	return weir.Read[Event](s, name, src, src.Bounded(),
		weir.WithURN("weir:source:nexmark"),
		weir.WithSourceIdentity("nexmark", name, src.Bounded())), nil
}
