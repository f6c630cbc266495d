package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/nexmark"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/service"
)

// This file holds the Go SDK side of the throughput-during-change bench
// (ChangeConfig.SDK): the query of package nexmark runs as the job of a Go
// program served by the in-process job service (its ProgramLoader), as a
// program built with package weirx runs, and an update is what a new
// build of such a program does: the running service checks the new graph
// and releases the job (CheckRelease, Close), and a service opened with
// the new build's loader replaces the job (StartProgram with Update).

// changeProgram is the executable recorded with the Go job.
const changeProgram = "weir bench nexmark (in process)"

// ChangeSDKQueries returns the Go queries an unbounded run may run: those
// whose results come while the input is unbounded, with a timestamp that
// says when they could first exist (an event's time, a window's end, an
// auction's close). More than YAML's (NexmarkYAMLStreamingQueries): q3
// joins in a stateful step that emits as persons and auctions meet, and
// the winning bids of q4, q6 and q9 come when each auction closes. Not q12:
// its panes fire on processing time, in the global window, whose timestamps
// say nothing of an event's age.
func ChangeSDKQueries() []string {
	return []string{"q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q9", "q11"}
}

// changeSDKQuery returns the Go query named q, or an error when an
// unbounded run cannot run it.
func changeSDKQuery(q string) (nexmark.Query, error) {
	qs, err := nexmark.LookupQueries(q)
	if err != nil || !slices.Contains(ChangeSDKQueries(), q) {
		return nexmark.Query{}, fmt.Errorf("change bench: the Go query %s does not emit while its input is unbounded; the unbounded runs take %v", q, ChangeSDKQueries())
	}
	return qs[0], nil
}

// changeSDKConfig is the Nexmark source configuration of the Go job: the
// YAML job's (ChangeJobYAML), with the windows in whole seconds.
func changeSDKConfig(rate int64, size, period time.Duration) nexmark.Config {
	limited := rate > 0
	if !limited {
		rate = 1_000_000
	}
	cfg := nexmark.Config{IsRateLimited: limited, UseWallclockEventTime: true, FirstEventRate: int(rate), NextEventRate: int(rate),
		WindowSizeSec: int64(size / time.Second), WindowPeriodSec: int64(period / time.Second)}
	cfg.EnsureDefaults()
	return cfg
}

// CheckSDKWindows reports windows of size and period that the Go queries
// cannot have: package nexmark sizes them in whole seconds.
func CheckSDKWindows(size, period time.Duration) error {
	if size < time.Second || size%time.Second != 0 || period < time.Second || period%time.Second != 0 {
		return fmt.Errorf("the Go queries' windows are whole seconds, not %s every %s", size, period)
	}
	return nil
}

// changeSDKLoader returns the loader of the Go job's program: query q over
// a Nexmark source at rate events per second (0: as fast as it can), each
// result replaced by a row of its timestamp (ts, milliseconds: the event's
// time, or the end of the result's window less a millisecond) and gen,
// published to the result topic through b when the checkpoint covering it
// commits, as the YAML job's WriteToPubSub does.
func changeSDKLoader(q nexmark.Query, b *pubsub.Broker, rate int64, gen int, size, period time.Duration) service.ProgramLoader {
	return func(job weir.JobInfo) (*weir.Pipeline, error) {
		p := weir.NewJobPipeline(job)
		s := p.Root()
		cfg := changeSDKConfig(rate, size, period)
		events, err := nexmark.Read(s, "Events", cfg)
		if err != nil {
			return nil, err
		}
		sink, err := newStampSink(b, job.ID+"/Results", int64(gen))
		if err != nil {
			return nil, err
		}
		q.Apply(s, events, cfg, "Results", sink)
		if err := p.Err(); err != nil {
			return nil, err
		}
		return p, nil
	}
}

// stampSink publishes, for each element, a row of its timestamp and the
// job's gen to the change bench's result topic: the pub/sub sink's
// checkpointed commits (its other methods) with the values replaced.
type stampSink struct {
	*pubsub.Sink
	schema *row.Schema
	gen    int64
}

// newStampSink returns a stampSink publishing through b as sink id.
func newStampSink(b *pubsub.Broker, id string, gen int64) (*stampSink, error) {
	inner, err := b.NewSink(pubsub.SinkConfig{Step: "Results", Topic: changeTopic, CreateTopic: true, ID: id})
	if err != nil {
		return nil, err
	}
	schema, err := row.NewSchema(row.Field{Name: "ts", Type: row.Of(row.KindInt)}, row.Field{Name: "gen", Type: row.Of(row.KindInt)})
	if err != nil {
		return nil, err
	}
	return &stampSink{Sink: inner, schema: schema, gen: gen}, nil
}

// Write buffers a stamp row for each element, for worker.
func (s *stampSink) Write(ctx context.Context, worker int, elems []contract.Element) error {
	return s.Sink.Write(ctx, worker, s.stamp(elems))
}

// WriteRejecting is Write for the executor, which prefers it: the
// embedded sink's, promoted, would publish the elements themselves.
func (s *stampSink) WriteRejecting(ctx context.Context, worker int, elems []contract.Element, rejects []contract.SinkReject) ([]contract.SinkReject, error) {
	return s.Sink.WriteRejecting(ctx, worker, s.stamp(elems), rejects)
}

// stamp returns elems with each value replaced by its stamp row.
func (s *stampSink) stamp(elems []contract.Element) []contract.Element {
	stamped := make([]contract.Element, len(elems))
	for i, e := range elems {
		e.Value = &row.Row{Schema: s.schema, Values: []any{int64(e.Time), s.gen}}
		stamped[i] = e
	}
	return stamped
}
