package snapshots

import (
	"context"
	"errors"
	"fmt"

	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"
)

// Where the Pub/Sub sources of a job created from a snapshot start: the
// snapshot records whose broker its positions are (recordBroker); a job
// from it places each position on the subscription the new job reads
// (placeSources), under another job name too, and on another broker only
// as the request says positions translate.

// SourcePlacer is what snapshots need of the broker to say whose Pub/Sub
// positions they hold and to start jobs from them: Options.Broker
// implements it (*pubsub.Broker does). Its methods block until the broker
// answers or ctx is done and are safe for concurrent use; the service calls
// them holding no lock but a job name's guard.
type SourcePlacer interface {
	// BrokerIdentity returns the broker's identity, made at its first
	// start and kept with its data.
	BrokerIdentity(ctx context.Context) (string, error)
	// PositionRange returns the subscription and topic of a checkpointed
	// position of a Pub/Sub source, its sequence, and the sequences the
	// topic stores.
	PositionRange(ctx context.Context, position []byte) (sub, topic string, seq, first, last uint64, err error)
	// PlaceSourcePosition returns the position from which a source reading
	// sub (through the service's subscription of topic, or "" for a named
	// subscription) starts, given a position of possibly another
	// subscription, translated (translate "") or not; it changes nothing.
	// A position beyond its topic's messages fails wrapping
	// contract.ErrForeignPosition.
	PlaceSourcePosition(ctx context.Context, position []byte, sub, topic, translate string) (placed []byte, startSeq uint64, note string, err error)
}

// How a job from a snapshot treats Pub/Sub positions of another broker
// (FromSnapshotRequest.SourcePositions).
const (
	// SourcePositionsFail refuses them (SNAPSHOT_FOREIGN_POSITIONS): the
	// default.
	SourcePositionsFail = "fail"
	// SourcePositionsPublishTime starts each source after the last message
	// published at or before its position's publish time: the suggested
	// choice.
	SourcePositionsPublishTime = "from-publish-time"
	// SourcePositionsEarliest starts each source at its topic's oldest message.
	SourcePositionsEarliest = "earliest"
	// SourcePositionsLatest starts each source after its topic's newest message.
	SourcePositionsLatest = "latest"
)

// translationExact is SourcePlacement.Translation of a position used as
// it is.
const translationExact = "exact"

func (s *Snapshots) sourcePlacer() (SourcePlacer, bool) {
	if s.Opts.Broker == nil {
		return nil, false
	}
	sp, ok := s.Opts.Broker.(SourcePlacer)
	return sp, ok
}

// recordBroker records in snap whose Pub/Sub positions it holds: the
// broker's identity and each Pub/Sub source position's topic and
// sequences. A broker that does not answer leaves snap without it (logged):
// the snapshot is still good on this broker, and its positions are checked
// against the topics where it is used. It holds no lock of its own.
func (s *Snapshots) recordBroker(ctx context.Context, snap *record.Snapshot, g *graph.Pipeline, positions map[string][][]byte) {
	sp, ok := s.sourcePlacer()
	if !ok || g == nil {
		return
	}
	var steps []*graph.Step
	for _, st := range g.Steps {
		if st.Kind == graph.KindSource && st.Source != nil && st.Source.Kind == core.PubSubSourceKind && len(positions[st.Name]) > 0 {
			steps = append(steps, st)
		}
	}
	if len(steps) == 0 {
		return
	}
	if c, ok := sp.(interface{ Connected() bool }); ok && !c.Connected() {
		// Away (a job waiting for it is snapshotted from the store): not
		// worth a call's timeout under the job's guard.
		s.Opts.Logger.Warn("a snapshot cannot say whose Pub/Sub positions it holds: the broker is unreachable", "snapshot_id", snap.ID)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, core.BrokerCallTimeout)
	defer cancel()
	id, err := sp.BrokerIdentity(ctx)
	if err != nil {
		s.Opts.Logger.Warn("a snapshot cannot say whose Pub/Sub positions it holds: the broker's identity is unavailable", "snapshot_id", snap.ID, "error", err)
		return
	}
	b := &record.SnapshotBroker{ID: id}
	for _, st := range steps {
		for _, p := range positions[st.Name] {
			sub, topic, seq, first, last, err := sp.PositionRange(ctx, p)
			if err != nil {
				s.Opts.Logger.Warn("recording a snapshot's Pub/Sub position", "snapshot_id", snap.ID, "step", st.Name, "error", err)
				continue
			}
			b.Sources = append(b.Sources, record.SnapshotSourceRange{Step: st.Name, Subscription: sub, Topic: topic, Seq: seq, FirstSeq: first, LastSeq: last})
		}
	}
	snap.Broker = b
}

// ValidSourcePositions checks a FromSnapshotRequest.SourcePositions value.
func ValidSourcePositions(v string) error {
	switch v {
	case "", SourcePositionsFail, SourcePositionsPublishTime, SourcePositionsEarliest, SourcePositionsLatest:
		return nil
	}
	return errcode.Errorf(errcode.InvalidRequest, "source_positions %q: want %s, %s, %s or %s", v,
		SourcePositionsPublishTime, SourcePositionsEarliest, SourcePositionsLatest, SourcePositionsFail)
}

// placeSources places the snapshot's Pub/Sub positions for job name: for
// each matched Pub/Sub source of graph g with a position in rec, the
// position from which it reads the subscription it reads in job name (the
// service's subscription of name and step for a topic: another name's
// position is moved onto it, on the same topic). Positions of another
// broker (snap.Broker's identity is not this broker's, or a position lies
// beyond its topic's messages) are refused with SNAPSHOT_FOREIGN_POSITIONS
// unless mode says how they translate. Anything that would make a source
// fail at its start (a missing topic or subscription, the name's
// subscription on another topic) is refused with
// SNAPSHOT_SOURCE_UNAVAILABLE. It changes nothing; it returns the positions
// to restore, by step, and what it did per source.
func (s *Snapshots) placeSources(ctx context.Context, snap *record.Snapshot, positions map[string][][]byte, report compat.Report, g *graph.Pipeline, name, mode string) (map[string][][]byte, []core.SourcePlacement, error) {
	type src struct {
		old, new, identity string
	}
	var srcs []src
	for _, m := range report.Matches {
		if m.Kind != graph.KindSource || len(positions[m.Old]) == 0 {
			continue
		}
		st := g.Step(m.New)
		if st == nil || st.Source == nil || st.Source.Kind != core.PubSubSourceKind {
			continue
		}
		srcs = append(srcs, src{old: m.Old, new: m.New, identity: st.Source.Identity})
	}
	if len(srcs) == 0 {
		return nil, nil, nil
	}
	sp, ok := s.sourcePlacer()
	if !ok {
		// No broker: the pipeline cannot load here anyway (its Pub/Sub
		// sources need one), and Load said so.
		return nil, nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, core.BrokerCallTimeout)
	defer cancel()
	here, err := sp.BrokerIdentity(ctx)
	if err != nil {
		return nil, nil, errcode.Errorf(errcode.PubSubUnavailable, "reading the broker's identity to place the snapshot's Pub/Sub positions: %w", err)
	}
	translating := mode != "" && mode != SourcePositionsFail
	translate := ""
	if snap.Broker != nil && snap.Broker.ID != "" && snap.Broker.ID != here {
		if !translating {
			return nil, nil, errcode.Errorf(errcode.SnapshotForeignPositions,
				"snapshot %s holds the Pub/Sub positions of broker %s, and this server's broker is %s: their sequences mean nothing here. "+
					"Say how they translate: --source-positions %s (suggested: each source starts after the last message published at or before its position's publish time), %s or %s; no job was created",
				snap.ID, snap.Broker.ID, here, SourcePositionsPublishTime, SourcePositionsEarliest, SourcePositionsLatest)
		}
		translate = mode
	}
	out := map[string][][]byte{}
	var placed []core.SourcePlacement
	for _, sc := range srcs {
		sub, topic, ok := core.SourceSubscription(name, sc.new, sc.identity)
		if !ok {
			continue
		}
		for _, p := range positions[sc.old] {
			how := translate
			np, start, note, err := sp.PlaceSourcePosition(ctx, p, sub, topic, how)
			if errors.Is(err, contract.ErrForeignPosition) && how == "" {
				if !translating {
					return nil, nil, errcode.Errorf(errcode.SnapshotForeignPositions,
						"source %s: %v: snapshot %s's position cannot be this topic's (another broker's, or the topic was created again since). "+
							"Say how it translates: --source-positions %s (suggested), %s or %s; no job was created",
						sc.new, err, snap.ID, SourcePositionsPublishTime, SourcePositionsEarliest, SourcePositionsLatest)
				}
				how = mode
				np, start, note, err = sp.PlaceSourcePosition(ctx, p, sub, topic, how)
			}
			if err != nil {
				return nil, nil, errcode.Errorf(errcode.SnapshotSourceUnavailable, "source %s cannot start from snapshot %s here: %w; no job was created", sc.new, snap.ID, err)
			}
			if how == "" {
				how = translationExact
			}
			out[sc.new] = append(out[sc.new], np)
			placed = append(placed, core.SourcePlacement{Step: sc.new, Subscription: sub, Topic: topic, Translation: how, StartSeq: start,
				Note: fmt.Sprintf("source %s: %s", sc.new, note)})
		}
	}
	return out, placed, nil
}
