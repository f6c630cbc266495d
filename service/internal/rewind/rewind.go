package rewind

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/weir-dev/weir/runner/contract"

	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/serviceopt"
	"github.com/weir-dev/weir/state"
	"github.com/weir-dev/weir/window"
)

// Where a stop-and-replace that re-reads retained input (the default,
// weir_replace_rewind=true) starts reading (issue 10 item 2).
//
// The rule. Let W be the old job's final watermark: the smallest of the
// watermark estimates its Pub/Sub splits recorded in its last checkpoint
// (a drain's final checkpoint; the drain's own jump to +∞ is not part of
// it). For every windowing strategy S that feeds a keyed step (Combine,
// GroupByKey, stateful ParDo) of the NEW pipeline, let C(S) be the
// smallest start of a window of S containing W − S.allowed_lateness: every
// window of S that is not expired at W starts at or after C(S), and an
// element with an event time before C(S) belongs only to windows of S that
// expired at W (true for fixed and sliding windows). Let A be the same
// for the OLD pipeline's strategies (the windows the old job still held
// state for). The re-read starts at event time
//
//	T = min over new strategies S of (C(S), and the start of every window of
//	    S that contains A and is not expired at W)
//
// and, per topic, at the smallest stream sequence the old job read with an
// event time at or after T's one-minute bucket (the event-time table in the
// source position, io/pubsub/rewind.go); a topic whose table has no such
// bucket starts right after the old job's last message. The new job's
// splits then (contract.RewindStart):
//   - skip, counting them (the source step's rewind_skipped_elements
//     metric, RewindSkipReporter; never a dead letter), messages whose event time is
//     before min C(S): all their windows expired at W, the old job's panes
//     for them are final (the old job dropped such messages as too late);
//   - hold their watermark at −∞ until they have read the old job's last
//     message: no window fires, nothing is late, while the new job catches
//     up; then every window not expired at W fires for the first time with
//     everything the old job had read for it (its first pane is complete
//     and supersedes the old job's partial panes in the sink), and the old
//     job had dropped nothing of such a window as too late. The watermark
//     then starts at W, as the old job's stood.
//
// Sliding windows in the new pipeline. An element with an event time at
// or after C(S) also belongs to windows of S that start before C(S), and
// those expired at W: the re-read cannot give them everything (what came
// before SkipBefore was skipped), and once the hold ends they fire at the
// watermark W with a partial total that, being the newest generation's,
// would overwrite the old job's complete final pane. So the new job owns
// only the windows that start at or after SkipBefore (rewindOwns, applied
// to every sink of the new job, SQL and Pub/Sub, for its whole life): a
// window that starts earlier is left out of its sinks, its old job's pane
// final in the sink. That is sound for every strategy at once: a window
// starting before SkipBefore = min C(S) starts before every C(S), so it
// expired at W whatever its strategy; a window starting at or after it
// holds only event times ≥ SkipBefore ≥ T, all re-read, so it is
// complete. For fixed windows nothing changes (no element at or after
// C(S) is in a window that starts before it). In a parallel replacement
// the same filter runs on top of the cut-over rule (cutRule), where the
// old job, still running, writes every window to SQL.
//
// Early and repeated triggers in the new pipeline. The hold at −∞ stops
// watermark panes during the catch-up, but a count, processing-time or
// early trigger would still fire partial panes that overwrite the old
// job's newer totals. The new job runs with
// runner.Options.HoldPanesAtMinWatermark (rewindsInput): while a keyed
// step's input watermark is −∞ it fires nothing, keeping each window's
// contents and trigger state, and evaluates those windows as soon as the
// watermark rises. The watermark travels in-band behind the data, so when
// it rises the step has aggregated every message up to the old job's last
// one: the first pane of each window after the catch-up is complete, and
// from then on the triggers behave as the pipeline says. Accumulating mode
// only: a discarding pane is a delta its consumers add up, and the
// re-read's first pane would carry again what the old job's panes had
// already delivered (a double count for whoever adds them, even though
// holding loses nothing), so discarding mode with an early or repeated
// trigger is refused; weir_replace_rewind=false is the continuation for
// such consumers.
//
// Refused (REWIND_BEYOND_RETENTION), before anything changes: a source of
// the old job that is not a Pub/Sub topic or subscription (files,
// Generate), or whose position predates event-time tracking; a table that
// no longer reaches back to T (pruned behind its horizon, see
// the Pub/Sub source's rewind horizon); a topic that no longer retains the
// first message to re-read. Refused as REPLACEMENT_UNAVAILABLE: session
// windows in either pipeline (a session still open at W can have started
// arbitrarily long before it, and the start of the earliest one the old
// job holds is in its keyed state, not in the event-time table, so no
// re-read point is known to cover it; with a different gap a re-read
// session could also merge with one the old job closed; and even with a
// known start, the drain's partial pane of an open session is a (key,
// window) of its own, shorter than the completed session, so an upsert
// sink would keep both rows: a double count for a reader), and discarding
// early or repeated triggers in the new pipeline (above).
// weir_replace_rewind=false avoids all of these.

// Rewinder is what a re-reading replacement needs of the broker:
// Options.Broker must implement it (the server's Pub/Sub broker does;
// broker_test.go checks). Its methods
// block until the broker answers or ctx is done.
type Rewinder interface {
	// PositionTrack decodes a checkpointed Pub/Sub source position.
	PositionTrack(ctx context.Context, position []byte) (contract.PositionTrack, error)
	// Retained returns the oldest message a topic holds: its sequence and
	// publish time.
	Retained(ctx context.Context, topic string) (uint64, time.Time, error)
	// SeekToSequence makes a subscription deliver from a stream sequence.
	SeekToSequence(ctx context.Context, sub string, seq uint64) error
}

func (s *Rewind) Broker() (Rewinder, bool) {
	if s.Opts.Broker == nil {
		return nil, false
	}
	r, ok := s.Opts.Broker.(Rewinder)
	return r, ok
}

// rewindInstead is what every rewind refusal suggests.
func rewindInstead(old *record.Job) string {
	return fmt.Sprintf("job %s (%s) was not changed: update it in place (weir run --update, or POST /v1/jobs:update) if the new pipeline is compatible, start the new pipeline from a snapshot of the job, or add %s=false for a plain continuation from the old job's position",
		old.ID, old.Name, serviceopt.KeyRewind)
}

// keyedStrategies returns the windowing strategies of the inputs of g's
// keyed steps, by step name.
func keyedStrategies(g *graph.Pipeline) map[string]window.Strategy {
	out := map[string]window.Strategy{}
	for _, st := range g.Steps {
		switch st.Kind {
		case graph.KindGroupByKey, graph.KindCombinePerKey, graph.KindStatefulParDo:
		default:
			continue
		}
		for _, id := range st.Inputs {
			if c := g.Collection(id); c != nil {
				ws := c.Windowing
				ws.EnsureDefaults()
				out[st.Name] = ws
			}
		}
	}
	return out
}

// earliestStart returns the smallest start of a window of fn containing t.
func earliestStart(fn window.Fn, t mtime.Time) mtime.Time {
	if t <= mtime.MinTimestamp || t >= mtime.MaxTimestamp {
		return t
	}
	ws := fn.Assign(nil, t)
	first := mtime.MaxTimestamp
	for _, w := range ws {
		first = min(first, w.Start)
	}
	if fn.Kind == window.KindGlobal || fn.Kind == "" {
		return mtime.MinTimestamp
	}
	return first
}

// earlyTrigger reports whether t fires before the watermark passes the
// end of the window (early panes, counts, processing time, repeats).
func earlyTrigger(t window.Trigger) bool {
	switch t.Kind {
	case window.TriggerDefault, window.TriggerNever, "":
		return false
	case window.TriggerAfterWatermark:
		return t.Early != nil
	}
	return true
}

// checkRewindable refuses, as REPLACEMENT_UNAVAILABLE, windowing the
// re-read cannot make complete (see the rule above).
func checkRewindable(old *record.Job, oldS, newS map[string]window.Strategy) error {
	var bad []string
	for _, m := range []struct {
		which string
		ss    map[string]window.Strategy
	}{{"old", oldS}, {"new", newS}} {
		for _, name := range sortedKeys(m.ss) {
			ws := m.ss[name]
			switch {
			case ws.Fn.Kind == window.KindSessions:
				bad = append(bad, fmt.Sprintf("step %s of the %s pipeline uses session windows: a session still open at the cut can have started arbitrarily long before it, and where the earliest one the old job holds begins is in its keyed state, not in the topic's event-time table, so no re-read point is known to rebuild it (a re-read session could also merge with one the old job closed); and the drain's partial pane of an open session is a row of its own (key, window), which the completed, longer session does not replace", name, m.which))
			case m.which == "new" && earlyTrigger(ws.Trigger) && ws.Accumulation != window.Accumulating:
				bad = append(bad, fmt.Sprintf("step %s of the new pipeline has an early or repeated trigger (%s) in %s mode: its panes are deltas that consumers add up, and the re-read's first pane would carry again what the old job's panes already delivered (a double count); use accumulation_mode: accumulating (each pane then carries the window's whole total, complete from the first pane after the catch-up)", name, ws.Trigger.Kind, cmp.Or(string(ws.Accumulation), string(window.Discarding))))
			}
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return errcode.Errorf(errcode.ReplacementUnavailable, "a replacement that re-reads retained input (%s, the default) cannot make every window complete: %s; %s",
		serviceopt.KeyRewind, strings.Join(bad, "; "), rewindInstead(old))
}

// rewindsInput reports whether j is the new job of a replacement that
// re-reads retained input, or an in-place update of one that carries its
// catch-up on (its panes are held while its sources catch up:
// runner.Options.HoldPanesAtMinWatermark).
func rewindsInput(j *record.Job) bool {
	return Of(j) != nil
}

// rewindKeep returns the windows the sinks of the new job of a
// replacement that re-reads from rp write: it leaves out the windows that
// start before rp.SkipBefore, which expired at the old job's final
// watermark and which the re-read cannot make complete (the rule for
// sliding windows at the top of this file). nil: every window.
func rewindKeep(rp *record.RewindPoint) func(w window.Window) bool {
	if rp == nil || !rp.SkipBefore.After(rewindMinTime) {
		return nil
	}
	skip := mtime.FromTime(rp.SkipBefore)
	return func(w window.Window) bool { return w.IsGlobal() || w.Start >= skip }
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func fmtTime(t mtime.Time) string {
	switch {
	case t <= mtime.MinTimestamp:
		return "-inf"
	case t >= mtime.MaxTimestamp:
		return "+inf"
	}
	return t.ToTime().Format(time.RFC3339Nano)
}

// Bounds of the times a RewindPoint records (JSON times have four-digit
// years): −∞ is recorded as the first instant of year 1, +∞ as the last
// of year 9999.
var (
	rewindMinTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	rewindMaxTime = time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC)
)

func toTime(t mtime.Time) time.Time {
	tt := t.ToTime()
	switch {
	case t <= mtime.MinTimestamp || tt.Before(rewindMinTime):
		return rewindMinTime
	case t >= mtime.MaxTimestamp || tt.After(rewindMaxTime):
		return rewindMaxTime
	}
	return tt
}

// rewindPoint computes where the new job of a stop-and-replace of old by
// newGraph re-reads each of old's topics from, by the rule written at the
// top of this file, from old's last durable checkpoint (at the cut-over:
// the drain's final one). It refuses with REWIND_BEYOND_RETENTION,
// SOURCE_NOT_REREADABLE or REPLACEMENT_UNAVAILABLE, saying what to do instead; it changes nothing.
func (s *Rewind) Point(ctx context.Context, old *record.Job, newGraph *graph.Pipeline) (record.RewindPoint, error) {
	og, err := graph.Parse(old.Graph)
	if err != nil {
		return record.RewindPoint{}, errcode.Internalf("job %s: its graph does not parse: %w", old.ID, err)
	}
	for _, st := range og.Steps {
		if st.Kind != graph.KindSource || st.Source != nil && st.Source.Kind == core.PubSubSourceKind {
			continue
		}
		kind := "a source of unknown kind"
		if st.Source != nil {
			kind = st.Source.Kind + " " + st.Source.Identity
		}
		return record.RewindPoint{}, errcode.Errorf(errcode.SourceNotRereadable, "source %s of job %s reads %s, which cannot be read again from a position (only Pub/Sub topics and subscriptions can); %s",
			st.Name, old.ID, kind, rewindInstead(old))
	}
	rw, ok := s.Broker()
	if !ok {
		return record.RewindPoint{}, errcode.Errorf(errcode.SourceNotRereadable, "this server has no Pub/Sub broker that can re-read a topic; %s", rewindInstead(old))
	}
	oldS, newS := keyedStrategies(og), keyedStrategies(newGraph)
	if err := checkRewindable(old, oldS, newS); err != nil {
		return record.RewindPoint{}, err
	}
	rec, err := s.Store.LastCheckpoint(old.ID)
	if errors.Is(err, state.ErrNotFound) {
		// No checkpoint yet: nothing it read is acknowledged (below).
		rec, err = nil, nil
	}
	if err != nil {
		return record.RewindPoint{}, errcode.Internalf("reading the last checkpoint of job %s: %w", old.ID, err)
	}
	var positions map[string][][]byte
	if rec != nil {
		positions = rec.Positions
	}
	type src struct {
		step string
		pt   contract.PositionTrack
	}
	var srcs []src
	for _, st := range og.Steps {
		if st.Kind != graph.KindSource {
			continue
		}
		ps := positions[st.Name]
		if len(ps) != 1 {
			// Nothing read yet (no checkpoint of it): the new job reads
			// the subscription from its acknowledgement floor, as the old
			// job would have.
			continue
		}
		pt, err := rw.PositionTrack(ctx, ps[0])
		if err != nil {
			return record.RewindPoint{}, errcode.Errorf(errcode.RewindBeyondRetention, "source %s of job %s: its checkpointed position cannot be read again (%v); %s", st.Name, old.ID, err, rewindInstead(old))
		}
		if !pt.Tracked {
			return record.RewindPoint{}, errcode.Errorf(errcode.RewindBeyondRetention, "source %s of job %s (topic %s) has a position written before weir tracked event times per message, so where to re-read from is unknown; %s",
				st.Name, old.ID, pt.Topic, rewindInstead(old))
		}
		srcs = append(srcs, src{step: st.Name, pt: pt})
	}
	wm := mtime.MaxTimestamp
	for _, sr := range srcs {
		wm = min(wm, sr.pt.Watermark)
	}
	t, skip := rewindTimes(wm, oldS, newS)
	rp := record.RewindPoint{Watermark: toTime(wm), FromTime: toTime(t), SkipBefore: toTime(skip)}
	if len(srcs) == 0 {
		rp.Watermark = toTime(mtime.MinTimestamp)
	}
	for _, sr := range srcs {
		pt := sr.pt
		rs := record.RewindSource{Step: sr.step, Topic: pt.Topic, Subscription: pt.Subscription, LastSequence: pt.StreamSeq, FirstSequence: pt.StreamSeq + 1, FromTime: rp.FromTime}
		if t < mtime.MaxTimestamp {
			if !pt.Covers(t) {
				return record.RewindPoint{}, errcode.Errorf(errcode.RewindBeyondRetention, "topic %s (source %s of job %s): the re-read must cover event times from %s (the earliest window still open at the old job's watermark %s), but the job's event-time table only reaches back to %s (it keeps the job's longest window plus allowed lateness behind its watermark, at most %s); %s",
					pt.Topic, sr.step, old.ID, fmtTime(t), fmtTime(wm), fmtTime(pt.From), contract.MaxRewindHorizon, rewindInstead(old))
			}
			if first, ok := pt.FirstSequenceFor(t); ok && first <= pt.StreamSeq {
				rs.FirstSequence = first
			}
		}
		if rs.FirstSequence <= pt.StreamSeq {
			oldest, oldestTime, err := rw.Retained(ctx, pt.Topic)
			if err != nil {
				return record.RewindPoint{}, errcode.Internalf("reading what topic %s retains: %w", pt.Topic, err)
			}
			if oldest > rs.FirstSequence {
				oldestText := "it holds no message any more"
				if !oldestTime.IsZero() {
					oldestText = fmt.Sprintf("its oldest retained message is sequence %d, published %s", oldest, oldestTime.Format(time.RFC3339))
				}
				return record.RewindPoint{}, errcode.Errorf(errcode.RewindBeyondRetention, "topic %s no longer retains the messages the replacement must re-read: it needs sequence %d on (event times from %s, the earliest window still open at the old job's watermark %s), but %s (retention or a message limit discarded the rest); %s",
					pt.Topic, rs.FirstSequence, fmtTime(t), fmtTime(wm), oldestText, rewindInstead(old))
			}
		}
		rp.Sources = append(rp.Sources, rs)
	}
	return rp, nil
}

// rewindTimes applies the rule at the top of this file: at the old job's
// final watermark wm, with the old and new pipelines' keyed windowing, it
// returns T (the earliest event time to re-read; +∞: nothing) and the skip
// bound (−∞: skip nothing).
func rewindTimes(wm mtime.Time, oldS, newS map[string]window.Strategy) (t, skip mtime.Time) {
	// A: the earliest event time of a window the old job held state for.
	a := mtime.MaxTimestamp
	for _, ws := range oldS {
		a = min(a, earliestStart(ws.Fn, lateBy(wm, ws.AllowedLateness)))
	}
	t, skip = mtime.MaxTimestamp, mtime.MaxTimestamp
	for _, ws := range newS {
		c := earliestStart(ws.Fn, lateBy(wm, ws.AllowedLateness))
		skip = min(skip, c)
		t = min(t, c)
		if a > mtime.MinTimestamp && a < mtime.MaxTimestamp {
			for _, w := range ws.Fn.Assign(nil, a) {
				if !ws.Expired(w, wm) {
					t = min(t, w.Start)
				}
			}
		}
	}
	if skip >= mtime.MaxTimestamp {
		skip = mtime.MinTimestamp // no keyed step: nothing expires
	}
	return t, skip
}

// lateBy returns wm − d, keeping ±∞.
func lateBy(wm mtime.Time, d mtime.Duration) mtime.Time {
	if wm <= mtime.MinTimestamp || wm >= mtime.MaxTimestamp {
		return wm
	}
	return wm.Add(-d)
}

// rewindStarts returns what the new job's Pub/Sub splits need to re-read
// for rp, by subscription (yamlpipe.JobEnv.PubSubRewind): the new job's,
// where a handover under a new name gave it its own.
func rewindStarts(rp *record.RewindPoint, handover []record.SubscriptionHandover) map[string]contract.RewindStart {
	if rp == nil {
		return nil
	}
	out := map[string]contract.RewindStart{}
	for _, rs := range rp.Sources {
		sub := rs.Subscription
		for _, h := range handover {
			if h.Old == sub {
				sub = h.New
			}
		}
		out[sub] = contract.RewindStart{SkipBefore: mtime.FromTime(rp.SkipBefore), Watermark: mtime.FromTime(rp.Watermark), HoldUntil: rs.LastSequence, FromSeq: rs.FirstSequence}
	}
	return out
}
