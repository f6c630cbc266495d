package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/trace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/nats-io/nats.go"

	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/service"
)

// The server variant of the update benchmark: a YAML job in the job
// service, fed through the embedded broker.
const (
	serverUpdateJob   = "bench-update"
	serverUpdateTopic = "bench-update-events"
	// gapPoll is how often the gap monitor samples the elements read.
	gapPoll = time.Millisecond
	// traceGapMin is the shortest stall the gap monitor marks in an
	// execution trace (weir.bench.gap log events, in microseconds).
	traceGapMin = 30 * time.Millisecond
)

// ServerUpdatePipelineYAML is the job of the server variant: per key, the
// count of the events of the topic (global window: the state only grows
// until the job is drained). With idField the source de-duplicates by the
// messages' id field (id_field, as Dataflow users get exactly-once from
// publishers that retry); every message carries a unique id either way.
func ServerUpdatePipelineYAML(idField bool) string {
	dedupe := ""
	if idField {
		dedupe = `
        id_field: id`
	}
	return `# weir bench update, server variant.
pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Events
      config:
        topic: ` + serverUpdateTopic + `
        schema: {key: int, id: string}` + dedupe + `
    - type: Combine
      name: CountByKey
      input: Events
      config:
        group_by: [key]
        combine:
          n: {value: key, fn: count}
    - type: WriteToSql
      name: Totals
      input: CountByKey
      config: {driver: sqlite, table: totals, key: [key], mode: upsert}
`
}

// ServerUpdateMigratedYAML is ServerUpdatePipelineYAML's next version with
// a declared state migration: CountByKey appends an accumulator (twice,
// a sum), which starts, for every key and window the running version
// stored, from the CEL init n * 2 over the old accumulators; the new
// execution evaluates it once per key, when it first touches the key.
func ServerUpdateMigratedYAML(idField bool) string {
	return strings.Replace(ServerUpdatePipelineYAML(idField), `          n: {value: key, fn: count}
`, `          n: {value: key, fn: count}
          twice: {value: key, fn: sum}
      migrations:
        accumulators:
          twice: {init: "n * 2"}
`, 1)
}

// ServerUpdateRekeyedYAML is ServerUpdatePipelineYAML's next version with
// a declared re-key: a new step halves each event's key before CountByKey,
// and the declaration moves every stored key k to k / 2 (a CEL
// expression), the counts of k and its neighbour merged. The move runs
// during the update's handover.
func ServerUpdateRekeyedYAML(idField bool) string {
	y := strings.Replace(ServerUpdatePipelineYAML(idField), `    - type: Combine
      name: CountByKey
      input: Events
`, `    - type: MapToFields
      name: Halve
      input: Events
      config:
        fields: {key: "key / 2"}
    - type: Combine
      name: CountByKey
      input: Halve
`, 1)
	y = strings.Replace(y, `          n: {value: key, fn: count}
`, `          n: {value: key, fn: count}
      migrations:
        rekey: {from: [key], key: {key: "key / 2"}}
`, 1)
	// The plain table holds the earlier keys' rows, which a re-key would
	// leave beside the new ones (the update is refused): the new version
	// writes a table of its own, so the benchmark measures the state's
	// re-key alone.
	return strings.Replace(y, "table: totals,", "table: totals_by_half,", 1)
}

// gapMonitor samples the elements the live execution of a job has read and
// keeps the longest time between two samples that saw new elements.
type gapMonitor struct {
	svc  atomic.Pointer[service.Service]
	name string

	gapTracker
	last     service.Progress // written by run only
	lastMark time.Time        // written by run only
}

func (g *gapMonitor) run(ctx context.Context) {
	t := time.NewTicker(gapPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		svc := g.svc.Load()
		if svc == nil {
			continue
		}
		p, ok := svc.ElementsRead(g.name)
		if !ok {
			continue
		}
		same := p.JobID == g.last.JobID && p.Started.Equal(g.last.Started)
		if moved := same && p.Read > g.last.Read || !same && p.Read > 0; moved {
			now := time.Now()
			if prev := g.lastMark; trace.IsEnabled() && !prev.IsZero() && now.Sub(prev) >= traceGapMin {
				// Mark the stall's end in the execution trace, with its
				// length, so a trace reader can find what ran during it.
				trace.Log(ctx, "weir.bench.gap", strconv.FormatInt(now.Sub(prev).Microseconds(), 10))
			}
			g.lastMark = now
			g.mark(now)
			g.last = p
		} else if !same {
			g.last = p
		}
	}
}

// submitWatched submits req to svc and starts a gapMonitor of its job. It
// returns when the submit began and the monitor, which the returned cancel
// stops.
func submitWatched(ctx context.Context, svc *service.Service, req service.SubmitRequest) (time.Time, *gapMonitor, context.CancelFunc, error) {
	start := time.Now()
	if _, err := svc.Submit(ctx, req); err != nil {
		return start, nil, nil, err
	}
	mon := &gapMonitor{name: req.Name}
	mon.svc.Store(svc)
	monCtx, stop := context.WithCancel(ctx)
	go mon.run(monCtx)
	return start, mon, stop, nil
}

// startBenchBroker starts an embedded broker with opts and creates topic
// on it; the returned stop shuts the broker down (within
// brokerShutdownTimeout, even after ctx is done).
func startBenchBroker(ctx context.Context, opts pubsub.Options, topic string) (*pubsub.Broker, func(), error) {
	b, err := pubsub.StartEmbedded(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), brokerShutdownTimeout)
		defer cancel()
		b.Shutdown(sctx)
	}
	if _, err := b.CreateTopic(ctx, topic, pubsub.TopicConfig{}); err != nil {
		stop()
		return nil, nil, err
	}
	return b, stop, nil
}

// fillKeys publishes one message for each of keys keys through pub and
// waits until job's live execution on svc has read them all; it gives up
// fillTimeout(keys) after start.
func fillKeys(ctx context.Context, svc *service.Service, pub *asyncPublisher, job string, keys int64, start time.Time) error {
	for k := int64(0); k < keys; k++ {
		if err := pub.publish(ctx, appendKeyMessage(make([]byte, 0, 40), k, 'f', k)); err != nil {
			return err
		}
	}
	if err := pub.flush(ctx); err != nil {
		return err
	}
	limit := fillTimeout(keys)
	for {
		p, _ := svc.ElementsRead(job)
		if p.Read >= keys {
			return nil
		}
		if time.Since(start) > limit {
			return fmt.Errorf("the job read %d of %d fill messages", p.Read, keys)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// touchKeys publishes one more message for each of keys keys through pub
// and returns how long job's aggregation on svc took to take them all in,
// counted from the first publication (the step's elements in, live).
func touchKeys(ctx context.Context, svc *service.Service, pub *asyncPublisher, job string, keys int64) (time.Duration, error) {
	in := func() (int64, error) {
		m, err := svc.Metrics(job)
		if err != nil || m == nil {
			return 0, fmt.Errorf("reading the metrics of %s: %w", job, err)
		}
		for _, st := range m.Steps {
			if st.Name == "CountByKey" {
				return st.ElementsIn, nil
			}
		}
		return 0, fmt.Errorf("job %s has no step CountByKey", job)
	}
	// The steady load's last messages settle first.
	before, err := in()
	for settled := 0; err == nil && settled < 5; {
		time.Sleep(20 * time.Millisecond)
		var now int64
		if now, err = in(); now == before {
			settled++
		} else {
			before, settled = now, 0
		}
	}
	if err != nil {
		return 0, err
	}
	start := time.Now()
	for k := int64(0); k < keys; k++ {
		if err := pub.publish(ctx, appendKeyMessage(make([]byte, 0, 40), k, 't', k)); err != nil {
			return 0, err
		}
	}
	if err := pub.flush(ctx); err != nil {
		return 0, err
	}
	limit := fillTimeout(keys)
	for {
		n, err := in()
		if err != nil {
			return 0, err
		}
		if n >= before+keys {
			return time.Since(start), nil
		}
		if time.Since(start) > limit {
			return 0, fmt.Errorf("the touch pass: the job took in %d of %d messages", n-before, keys)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fillTimeout is how long a job may take to read the fill of keys keys:
// stallTimeout plus a second per 10,000 keys.
func fillTimeout(keys int64) time.Duration {
	return stallTimeout + time.Duration(keys/10000)*time.Second
}

// steadyPublisher publishes events at a fixed rate until stopped: keys
// cycle through [0, keys) in a scattered order.
func steadyPublisher(ctx context.Context, p *asyncPublisher, keys int64, rate float64, next *atomic.Int64) error {
	const tick = 5 * time.Millisecond
	start, sent := time.Now(), int64(0)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return p.flush(context.WithoutCancel(ctx))
		case <-t.C:
		}
		due := int64(time.Since(start).Seconds() * rate)
		for ; sent < due; sent++ {
			i := next.Add(1) - 1
			if err := p.publish(ctx, appendKeyMessage(nil, (i*2654435761)%keys, 's', i)); err != nil {
				next.Add(-1) // not handed to the broker
				if ctx.Err() != nil {
					// Stopped while waiting for an acknowledgement: the
					// messages in flight are counted, so wait for them.
					return p.flush(context.WithoutCancel(ctx))
				}
				return err
			}
		}
	}
}

// appendKeyMessage appends the message of key k with the unique id
// kind+n (kind 'f' for the fill, 's' for the steady load).
func appendKeyMessage(dst []byte, k int64, kind byte, n int64) []byte {
	dst = append(dst, `{"key":`...)
	dst = strconv.AppendInt(dst, k, 10)
	dst = append(dst, `,"id":"`...)
	dst = append(dst, kind)
	dst = strconv.AppendInt(dst, n, 10)
	return append(dst, `"}`...)
}

// RunServerUpdate runs the server variant of the update benchmark once in
// this process: the YAML job of ServerUpdatePipelineYAML runs in a job
// service with an embedded broker; cfg.Keys messages with distinct keys
// build its state, then a steady load of cfg.Rate messages per second
// runs with a checkpoint every second. Mode "update" replaces the job with
// `weir run --update` semantics (service.Update); mode "restore" stops the
// service (every job checkpoints) and opens it again (every job restores
// its state from the store). The pause is the longest time the job read
// nothing around the swap; BaselineMillis is the same measure over as long
// a stretch of steady load before it. With cfg.Swaps > 1 the swap repeats,
// each after its own baseline stretch, and the outcome carries every pause
// and baseline gap with their p50 and p99.
func RunServerUpdate(ctx context.Context, cfg UpdateConfig) (UpdateOutcome, error) {
	cfg.ensureDefaults()
	out := UpdateOutcome{Mode: cfg.Mode, Keys: cfg.Keys, Server: true, IDField: cfg.IDField, Migrate: cfg.Migrate, Rekey: cfg.Rekey}
	if cfg.Mode != "update" && cfg.Mode != "restore" {
		return out, fmt.Errorf("update bench: mode %q is neither update nor restore", cfg.Mode)
	}
	if (cfg.Migrate || cfg.Rekey) && cfg.Mode != "update" {
		return out, fmt.Errorf("update bench: a migration is measured at an in-place update (mode update), not %s", cfg.Mode)
	}
	if cfg.Migrate && cfg.Rekey {
		return out, fmt.Errorf("update bench: one migration at a time: an init (Migrate) or a re-key (Rekey)")
	}
	logger := slog.New(discardHandler{})
	bopts := pubsub.Options{StoreDir: filepath.Join(cfg.Dir, "broker"), Logger: logger}
	if cfg.Publisher != nil {
		port, err := freePort()
		if err != nil {
			return out, err
		}
		bopts.Listen = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	b, stopBroker, err := startBenchBroker(ctx, bopts, serverUpdateTopic)
	if err != nil {
		return out, err
	}
	defer stopBroker()
	sopts := service.Options{DataDir: filepath.Join(cfg.Dir, "data"), Logger: logger, Broker: b}
	svc, err := service.Open(ctx, sopts)
	if err != nil {
		return out, err
	}
	defer func() { svc.Close(context.WithoutCancel(ctx)) }()
	wd, err := os.Getwd()
	if err != nil {
		return out, err
	}
	req := service.SubmitRequest{Name: serverUpdateJob, Pipeline: ServerUpdatePipelineYAML(cfg.IDField), PipelineFile: "bench-update.yaml",
		BaseDir: wd, Options: record.JobOptions{NumWorkers: cfg.Workers}}
	start, mon, stopMon, err := submitWatched(ctx, svc, req)
	if err != nil {
		return out, err
	}
	defer stopMon()

	// Fill: one message per key, as fast as the broker takes them.
	pub, err := newAsyncPublisher(b, serverUpdateTopic)
	if err != nil {
		return out, err
	}
	if err := fillKeys(ctx, svc, pub, serverUpdateJob, cfg.Keys, start); err != nil {
		return out, err
	}
	out.FillSeconds = time.Since(start).Seconds()
	if cfg.AfterFill != nil {
		cfg.AfterFill()
	}

	// Steady load, with the service's checkpoint every second.
	var next atomic.Int64
	var stopPublisher func() error
	if cfg.Publisher != nil {
		stop, err := startPublisherProcess(cfg.Publisher(ctx, "nats://"+bopts.Listen, serverUpdateTopic, cfg.Keys, cfg.Rate), &next)
		if err != nil {
			return out, err
		}
		stopPublisher = stop
	} else {
		pubCtx, stopPub := context.WithCancel(ctx)
		pubErr := make(chan error, 1)
		go func() { pubErr <- steadyPublisher(pubCtx, pub, cfg.Keys, cfg.Rate, &next) }()
		stopPublisher = func() error {
			stopPub()
			return <-pubErr
		}
	}
	time.Sleep(cfg.Steady)
	for i := 0; i < cfg.Swaps; i++ {
		mon.reset()
		time.Sleep(cfg.Steady)
		base := float64(mon.reset().Microseconds()) / 1000
		swapStart := time.Now()
		trace.Log(ctx, "weir.bench.swap", "start")
		switch cfg.Mode {
		case "update":
			ureq := req
			switch {
			case cfg.Migrate:
				ureq.Pipeline = ServerUpdateMigratedYAML(cfg.IDField)
			case cfg.Rekey:
				ureq.Pipeline = ServerUpdateRekeyedYAML(cfg.IDField)
			}
			res, err := svc.Update(ctx, service.UpdateRequest{SubmitRequest: ureq})
			if err != nil {
				stopPublisher()
				return out, fmt.Errorf("updating the job (swap %d): %w", i+1, err)
			}
			out.Phases = map[string]float64{"service_pause": float64(res.PauseMillis)}
		case "restore":
			if err := svc.Close(ctx); err != nil {
				stopPublisher()
				return out, fmt.Errorf("stopping the service (swap %d): %w", i+1, err)
			}
			if svc, err = service.Open(ctx, sopts); err != nil {
				stopPublisher()
				return out, fmt.Errorf("reopening the service (swap %d): %w", i+1, err)
			}
			mon.svc.Store(svc)
			// Open answers at once and resumes the job in the background:
			// the swap ends when the job has resumed.
			select {
			case <-svc.Recovered():
			case <-ctx.Done():
				stopPublisher()
				return out, ctx.Err()
			}
		}
		swap := float64(time.Since(swapStart).Microseconds()) / 1000
		trace.Log(ctx, "weir.bench.swap", "end")
		time.Sleep(cfg.Steady)
		pause := float64(mon.reset().Microseconds()) / 1000
		out.PausesMillis = append(out.PausesMillis, pause)
		out.BaselinesMillis = append(out.BaselinesMillis, base)
		out.SwapMillis = math.Max(out.SwapMillis, swap)
		out.PauseMillis = math.Max(out.PauseMillis, pause)
		out.BaselineMillis = math.Max(out.BaselineMillis, base)
	}
	out.PauseP50Millis, out.PauseP99Millis = Percentile(out.PausesMillis, 50), Percentile(out.PausesMillis, 99)
	out.BaselineP50Millis, out.BaselineP99Millis = Percentile(out.BaselinesMillis, 50), Percentile(out.BaselinesMillis, 99)
	if err := stopPublisher(); err != nil {
		return out, err
	}
	touch, err := touchKeys(ctx, svc, pub, serverUpdateJob, cfg.Keys)
	if err != nil {
		return out, err
	}
	out.TouchSeconds = touch.Seconds()
	if cfg.Migrate || cfg.Rekey {
		// Every key migrated: an init or a re-key that failed for one is
		// a reject.
		m, err := svc.Metrics(serverUpdateJob)
		if err != nil || m == nil {
			return out, fmt.Errorf("reading the metrics after the migration: %w", err)
		}
		for _, st := range m.Steps {
			if st.Name != "CountByKey" {
				continue
			}
			if st.Rejects > 0 {
				return out, fmt.Errorf("the migration failed for %d keys: %v", st.Rejects, st.RejectsByReason)
			}
			if cfg.Rekey {
				if st.Keys == nil {
					return out, fmt.Errorf("after re-keying %d keys the step reports no key count", cfg.Keys)
				}
				if *st.Keys != (cfg.Keys+1)/2 {
					return out, fmt.Errorf("after re-keying %d keys to key / 2 the step holds %d keys, want %d", cfg.Keys, *st.Keys, (cfg.Keys+1)/2)
				}
				out.KeysAfter = *st.Keys
			}
		}
	}
	if cfg.BeforeEnd != nil {
		cfg.BeforeEnd()
	}
	out.Elements = cfg.Keys + next.Load()
	if _, err := svc.Cancel(ctx, serverUpdateJob); err != nil {
		return out, err
	}
	return out, nil
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port for the broker: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// PublishOutcome is what `weir bench-child-publish` prints when it stops.
type PublishOutcome struct {
	// Published is the number of messages the broker acknowledged.
	Published int64 `json:"published"`
}

// startPublisherProcess starts cmd (a `weir bench-child-publish`) and
// returns the function that stops it: it closes the child's stdin, waits
// for it and adds the messages it published to next.
func startPublisherProcess(cmd *exec.Cmd, next *atomic.Int64) (func() error, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("starting the publisher process: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("starting the publisher process: %w", err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the publisher process: %w", err)
	}
	// The process says "ready" once it is connected and publishing: the
	// steady stretch is timed from then, not from its start, which on a
	// loaded machine can take longer than the stretch itself.
	ready := make(chan struct{})
	var stdout bytes.Buffer
	read := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		signalled := false
		for sc.Scan() {
			if !signalled && sc.Text() == publisherReady {
				signalled = true
				close(ready)
				continue
			}
			stdout.Write(sc.Bytes())
			stdout.WriteByte('\n')
		}
		if !signalled {
			close(ready)
		}
		read <- sc.Err()
	}()
	stop := func() error {
		_ = stdin.Close()
		rerr := <-read
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("the publisher process: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
		}
		if rerr != nil {
			return fmt.Errorf("reading the publisher process's output: %w", rerr)
		}
		var o PublishOutcome
		if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &o); err != nil {
			return fmt.Errorf("reading what the publisher process published: %w (%q)", err, stdout.String())
		}
		next.Add(o.Published)
		return nil
	}
	select {
	case <-ready:
	case <-time.After(publisherStartTimeout):
		return nil, errors.Join(fmt.Errorf("the publisher process did not start publishing within %s", publisherStartTimeout), stop())
	}
	return stop, nil
}

// publisherReady is the line the publisher process prints when it starts
// publishing; publisherStartTimeout bounds the wait for it.
const (
	publisherReady        = "ready"
	publisherStartTimeout = 2 * time.Minute
)

// RunPublisher is `weir bench-child-publish`: it connects to the broker at
// url and publishes the server variant's steady load (keys cycling through
// [0, keys) in a scattered order, rate messages per second) until ctx is
// done, then waits for the acknowledgements in flight. Once connected it
// writes the line "ready" to ready, for the parent to time the steady
// stretch from then.
func RunPublisher(ctx context.Context, url, topic string, keys int64, rate float64, ready io.Writer) (PublishOutcome, error) {
	nc, err := nats.Connect(url, nats.Name("weir-bench-publisher"))
	if err != nil {
		return PublishOutcome{}, fmt.Errorf("connecting to the broker at %s: %w", url, err)
	}
	defer nc.Close()
	pub, err := newConnPublisher(nc, topic)
	if err != nil {
		return PublishOutcome{}, err
	}
	if _, err := fmt.Fprintln(ready, publisherReady); err != nil {
		return PublishOutcome{}, fmt.Errorf("saying the publisher is ready: %w", err)
	}
	var next atomic.Int64
	err = steadyPublisher(ctx, pub, keys, rate, &next)
	return PublishOutcome{Published: next.Load()}, err
}
