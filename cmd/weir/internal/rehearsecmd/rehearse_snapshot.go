package rehearsecmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/cmd/weir/internal/serverconn"
	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/sandbox"
	"github.com/weir-dev/weir/service"
	"github.com/weir-dev/weir/service/record"
)

// weir rehearse --from-snapshot: both pipelines start from a job
// snapshot's keyed state, the old through its own graph and the new
// through the compatibility mapping, exactly as an update or a job created
// from the snapshot would take it over; the recorded input is what came
// after the snapshot's source positions.

// snapshotStart is a rehearsal's start from a job snapshot.
type snapshotStart struct {
	id    string
	snap  *record.Snapshot
	state *sandbox.State
	// oldSteps and newSteps map each step of the old and the new pipeline
	// to the snapshot's step whose state it takes (the compatibility
	// check's matches).
	oldSteps, newSteps map[string]string
	// toSnap maps an old pipeline's step to the snapshot's step.
	toSnap map[string]string
	// warnings are the compatibility check's warnings for the new
	// pipeline.
	warnings []string
}

// SnapshotReport is the report's account of a --from-snapshot start.
type SnapshotReport struct {
	ID         string `json:"id"`
	Job        string `json:"job"`
	Generation int64  `json:"generation"`
	// Entries counts the state entries both pipelines started from;
	// Steps names the snapshot's steps that had state.
	Entries int64    `json:"entries"`
	Steps   []string `json:"steps"`
	// Warnings are the compatibility check's warnings for the new
	// pipeline's start from the snapshot.
	Warnings []string `json:"warnings,omitempty"`
}

func (s *snapshotStart) report() *SnapshotReport {
	return &SnapshotReport{ID: s.id, Job: s.snap.JobName, Generation: s.snap.Generation, Entries: s.state.Entries(), Steps: s.state.Steps(), Warnings: s.warnings}
}

// loadSnapshotStart reads the snapshot arg (a snapshot ID on the server,
// or the path of an exported snapshot file) and checks that both
// pipelines can start from it. A snapshot read from the server is
// downloaded to a temporary file in tmpDir ("": $TMPDIR).
func loadSnapshotStart(ctx context.Context, server serverconn.Flag, arg, tmpDir string, oldP, newP *weir.Pipeline, mapping compat.Mapping) (*snapshotStart, error) {
	st := &snapshotStart{id: arg, state: sandbox.NewState()}
	add := func(step string, kg uint16, key, value []byte) error {
		st.state.Add(step, kg, key, value)
		return nil
	}
	if fi, err := os.Stat(arg); err == nil && !fi.IsDir() {
		f, err := os.Open(arg)
		if err != nil {
			return nil, cli.WithCode(cli.ExitRehearsalFailed, fmt.Errorf("--from-snapshot: %w", err))
		}
		defer f.Close()
		if st.snap, _, err = service.ReadSnapshotFileState(f, add); err != nil {
			return nil, cli.WithCode(cli.ExitRehearsalFailed, fmt.Errorf("--from-snapshot %s: %w", arg, err))
		}
		st.id = st.snap.ID
	} else {
		c, err := serverconn.NewClient(server)
		if err != nil {
			return nil, err
		}
		tmp, err := os.CreateTemp(tmpDir, "weir-rehearse-snapshot-*")
		if err != nil {
			return nil, cli.WithCode(cli.ExitFailure, fmt.Errorf("creating a temporary file for the snapshot: %w", err))
		}
		defer os.Remove(tmp.Name())
		defer tmp.Close()
		if _, err := c.ExportSnapshot(ctx, arg, tmp); err != nil {
			return nil, serverconn.Error(ctx, c, fmt.Errorf("reading job snapshot %s: %w", arg, err))
		}
		if _, err := tmp.Seek(0, 0); err != nil {
			return nil, cli.WithCode(cli.ExitFailure, err)
		}
		if st.snap, _, err = service.ReadSnapshotFileState(tmp, add); err != nil {
			return nil, cli.WithCode(cli.ExitRehearsalFailed, fmt.Errorf("job snapshot %s: %w", arg, err))
		}
	}
	g, err := graph.Parse(st.snap.Graph)
	if err != nil {
		return nil, cli.WithCode(cli.ExitRehearsalFailed, fmt.Errorf("job snapshot %s: its graph: %w", st.id, err))
	}
	if st.oldSteps, _, err = startSteps(g, oldP, compat.Mapping{}); err != nil {
		return nil, cli.WithCode(cli.ExitRehearsalFailed, fmt.Errorf("the old pipeline cannot start from job snapshot %s (job %s, generation %d): %w", st.id, st.snap.JobName, st.snap.Generation, err))
	}
	if st.newSteps, st.warnings, err = startSteps(g, newP, mapping); err != nil {
		return nil, cli.WithCode(cli.ExitRehearsalFailed, fmt.Errorf("the new pipeline cannot start from job snapshot %s (job %s, generation %d), as an update could not: %w", st.id, st.snap.JobName, st.snap.Generation, err))
	}
	st.toSnap = map[string]string{}
	for snapStep, step := range invert(st.oldSteps) {
		st.toSnap[step] = snapStep
	}
	return st, nil
}

// startSteps checks that p can take over the state of snapshot graph g
// (under mapping) and returns, per step of p, the snapshot step whose
// state it takes, and the check's warnings.
func startSteps(g *graph.Pipeline, p *weir.Pipeline, mapping compat.Mapping) (map[string]string, []string, error) {
	rep := compat.Check(g, p.Graph(), compat.Options{Mapping: mapping})
	if !rep.Compatible {
		var why []string
		for _, f := range rep.Errors {
			w := fmt.Sprintf("%s (%s)", f.Reason, f.Code)
			if f.Fix != "" {
				w += "; fix: " + f.Fix
			}
			why = append(why, w)
		}
		return nil, nil, errors.New(strings.Join(why, "; "))
	}
	steps := map[string]string{}
	for _, m := range rep.Matches {
		steps[m.New] = m.Old
	}
	var warn []string
	for _, f := range rep.Warnings {
		warn = append(warn, fmt.Sprintf("%s: %s", f.Code, f.Reason))
	}
	return steps, warn, nil
}

// invert returns m's values mapped to its keys.
func invert(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}

// sameBroker checks that the snapshot's topic positions belong to the
// broker of the server c reads the topics from: a snapshot file made on
// another server (or imported here from one) counts sequences of another
// broker's topics, and reading this one's from them would rehearse on the
// wrong messages. A snapshot without a broker record (an older export) is
// not checked; nil s (no --from-snapshot) neither.
func (s *snapshotStart) sameBroker(ctx context.Context, c *client.Client) error {
	if s == nil || s.snap.Broker == nil || s.snap.Broker.ID == "" {
		return nil
	}
	b, err := c.Broker(ctx)
	if err != nil {
		return serverconn.Error(ctx, c, fmt.Errorf("reading the broker identity of the server: %w", err))
	}
	if b.ID != s.snap.Broker.ID {
		return cli.WithCode(cli.ExitRehearsalFailed, fmt.Errorf("job snapshot %s holds positions of broker %s, and this server's broker is %s: its topics' sequences are not the snapshot's; rehearse it against the server it was taken on, or give the input with --events", s.id, s.snap.Broker.ID, b.ID))
	}
	return nil
}

// after returns the stream sequence of the last message of topic that
// the snapshot counts as read by the old pipeline's source step.
func (s *snapshotStart) after(step, topic string) (uint64, error) {
	snapStep, ok := s.toSnap[step]
	if !ok {
		return 0, fmt.Errorf("source %s has no position in job snapshot %s: the old pipeline's sources must be the snapshot's", step, s.id)
	}
	if b := s.snap.Broker; b != nil {
		for _, r := range b.Sources {
			if r.Step != snapStep {
				continue
			}
			if r.Topic != topic {
				return 0, fmt.Errorf("source %s reads topic %s; in job snapshot %s it read topic %s", step, topic, s.id, r.Topic)
			}
			return r.Seq, nil
		}
	}
	positions := s.snap.Positions[snapStep]
	if len(positions) != 1 {
		return 0, fmt.Errorf("source %s has %d positions in job snapshot %s, want the one of a ReadFromPubSub source", step, len(positions), s.id)
	}
	_, seq, err := pubsub.PositionSequence(positions[0])
	if err != nil {
		return 0, fmt.Errorf("source %s in job snapshot %s: %w", step, s.id, err)
	}
	return seq, nil
}
