package snapshots

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/graph"
)

// Subscription snapshots taken with a job snapshot (--snapshot-sources),
// and what the API needs to refuse a seek of a subscription a job reads.

// SourceSnapshotter is what a job snapshot with SnapshotSources needs of
// the broker: Options.Broker must implement it (*pubsub.Broker does). Its
// methods block until the broker answers or ctx is done, and are safe for
// concurrent use; the service calls them holding no lock but a job name's
// guard.
type SourceSnapshotter interface {
	// PositionSubscription returns the subscription a checkpointed source
	// position of a Pub/Sub source reads.
	PositionSubscription(position []byte) (string, error)
	// SnapshotSourcePosition creates the subscription snapshot name at
	// exactly position (what the position's checkpoint read counts as
	// acknowledged) and returns its subscription, topic and expire time.
	SnapshotSourcePosition(ctx context.Context, name string, position []byte) (sub, topic string, expire time.Time, err error)
	// DropSubscriptionSnapshot deletes a subscription snapshot if it
	// exists (one that expired on its own is no error).
	DropSubscriptionSnapshot(ctx context.Context, name string) error
	// ExpireSubscriptionSnapshots deletes the expired subscription snapshots.
	ExpireSubscriptionSnapshots(ctx context.Context) error
}

func (s *Snapshots) sourceSnapshotter() (SourceSnapshotter, bool) {
	if s.Opts.Broker == nil {
		return nil, false
	}
	ss, ok := s.Opts.Broker.(SourceSnapshotter)
	return ss, ok
}

// SourceSnapshotName is the name of the subscription snapshot of sub taken
// with job snapshot id: "<id>--<sub>".
func SourceSnapshotName(id, sub string) string { return id + "--" + sub }

// planSourceSnapshots returns the subscription snapshots a job snapshot
// with snapshot_sources takes of the Pub/Sub sources of graph g at the
// cut's positions (names only; the times come when they are created).
func planSourceSnapshots(ss SourceSnapshotter, id string, g *graph.Pipeline, positions map[string][][]byte) ([]record.PubsubSnapshotMetadata, map[string][]byte, error) {
	meta := []record.PubsubSnapshotMetadata{}
	pos := map[string][]byte{}
	for _, st := range g.Steps {
		if st.Kind != graph.KindSource || st.Source == nil || st.Source.Kind != core.PubSubSourceKind {
			continue
		}
		ps := positions[st.Name]
		if len(ps) == 0 {
			return nil, nil, fmt.Errorf("source %s has no position at the cut (it has read nothing yet)", st.Name)
		}
		for _, p := range ps {
			sub, err := ss.PositionSubscription(p)
			if err != nil {
				return nil, nil, fmt.Errorf("source %s: %w", st.Name, err)
			}
			name := SourceSnapshotName(id, sub)
			if _, dup := pos[name]; dup {
				continue
			}
			pos[name] = p
			meta = append(meta, record.PubsubSnapshotMetadata{Subscription: sub, SnapshotName: name})
		}
	}
	return meta, pos, nil
}

// takeSourceSnapshots creates the planned subscription snapshots, filling
// in their topics and expire times. On failure the caller drops them all.
func takeSourceSnapshots(ctx context.Context, ss SourceSnapshotter, meta []record.PubsubSnapshotMetadata, pos map[string][]byte) error {
	for i := range meta {
		m := &meta[i]
		sub, topic, expire, err := ss.SnapshotSourcePosition(ctx, m.SnapshotName, pos[m.SnapshotName])
		if err != nil {
			return fmt.Errorf("snapshotting subscription %s: %w", m.Subscription, err)
		}
		m.Subscription, m.Topic, m.ExpireTime = sub, topic, expire
	}
	return nil
}

// dropSourceSnapshots deletes the subscription snapshots of snap (a
// deleted, expired or failed job snapshot); those already gone (expired
// on their own) are skipped. Errors are logged: the job snapshot's own
// state is already recorded. It holds no lock.
func (s *Snapshots) dropSourceSnapshots(snap *record.Snapshot) {
	ss, ok := s.sourceSnapshotter()
	if !ok || len(snap.PubsubMetadata) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), core.BrokerCallTimeout)
	defer cancel()
	for _, m := range snap.PubsubMetadata {
		if err := ss.DropSubscriptionSnapshot(ctx, m.SnapshotName); err != nil {
			s.Opts.Logger.Error("deleting a subscription snapshot of a job snapshot", "snapshot_id", snap.ID,
				"subscription_snapshot", m.SnapshotName, "error", err)
		}
	}
}

// expireSourceSnapshots asks the broker to delete expired subscription
// snapshots; a failure is logged.
func (s *Snapshots) expireSourceSnapshots() {
	ss, ok := s.sourceSnapshotter()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(s.Ctx, core.BrokerCallTimeout)
	defer cancel()
	if err := ss.ExpireSubscriptionSnapshots(ctx); err != nil && !errors.Is(err, context.Canceled) {
		s.Opts.Logger.Error("deleting expired subscription snapshots", "error", err)
	}
}

// snapshotJobSources takes the subscription snapshots of --snapshot-sources
// for snap at the cut's positions: it records their names in snap's record
// first (so a stop part-way leaves names that recovery can drop), then
// creates them and fills in snap.PubsubMetadata. The caller holds the
// job name's guard; on failure it fails snap and drops what was created.
func (s *Snapshots) snapshotJobSources(ctx context.Context, ss SourceSnapshotter, snap *record.Snapshot, j *record.Job, positions map[string][][]byte) error {
	g, err := graph.Parse(j.Graph)
	if err != nil {
		return fmt.Errorf("the job's graph does not parse: %w", err)
	}
	meta, pos, err := planSourceSnapshots(ss, snap.ID, g, positions)
	if err != nil {
		return err
	}
	snap.PubsubMetadata = meta
	if err := s.PutSnapshot(snap); err != nil {
		return err
	}
	if err := takeSourceSnapshots(ctx, ss, meta, pos); err != nil {
		return err
	}
	snap.PubsubMetadata = meta
	return nil
}
