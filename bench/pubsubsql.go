package bench

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/weir-dev/weir/mtime"
)

// Defaults of PubSubConfig.
const (
	// DefaultMessages is how many messages pubsub-to-sql pre-publishes.
	DefaultMessages int64 = 5_000_000
	// DefaultPubSubWindow is the size of the fixed windows of the pipeline.
	DefaultPubSubWindow = time.Minute
	// DefaultCheckpointInterval is how often the pipeline variant takes a
	// checkpoint: the job service's default.
	DefaultCheckpointInterval = time.Second
	// DefaultLatencyRate is the publish rate of the latency variant, in
	// messages per second.
	DefaultLatencyRate = 20_000
	// DefaultLatencyDuration is how long the latency variant publishes.
	DefaultLatencyDuration = 20 * time.Second
	// MessageSize is the size of every published message: JSON padded to
	// this many bytes with a field the pipelines' schemas ignore.
	MessageSize = 100
)

// Names of the broker objects of pubsub-to-sql.
const (
	pubsubTopic = "bench"
	// brokerDirName is the embedded broker's store inside the shared
	// directory the publish child fills and the consumers reopen.
	brokerDirName = "broker"
)

// PubSubConfig is the shape of the pubsub-to-sql workload. The zero value
// of every field is its documented default.
type PubSubConfig struct {
	// Messages is how many messages are pre-published and consumed by the
	// raw and pipeline variants. Default DefaultMessages (5M).
	Messages int64
	// Keys is how many distinct keys the messages spread over. Default
	// DefaultKeys (1,000).
	Keys int64
	// Window is the size of the pipeline's fixed windows, whole seconds.
	// Default DefaultPubSubWindow (1m).
	Window time.Duration
	// Workers is the pipelines' number of workers. Default 1 (the job
	// service's default).
	Workers int
	// CheckpointInterval is how often the pipeline and latency variants
	// checkpoint. Default DefaultCheckpointInterval (1s).
	CheckpointInterval time.Duration
	// LatencyRate is the latency variant's publish rate, messages per
	// second. Default DefaultLatencyRate (20,000).
	LatencyRate int
	// LatencyDuration is how long the latency variant publishes. Default
	// DefaultLatencyDuration (20s).
	LatencyDuration time.Duration
}

// EnsureDefaults fills unset fields with their defaults.
func (c *PubSubConfig) EnsureDefaults() {
	if c.Messages == 0 {
		c.Messages = DefaultMessages
	}
	if c.Keys == 0 {
		c.Keys = DefaultKeys
	}
	if c.Window == 0 {
		c.Window = DefaultPubSubWindow
	}
	if c.Workers == 0 {
		c.Workers = 1
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = DefaultCheckpointInterval
	}
	if c.LatencyRate == 0 {
		c.LatencyRate = DefaultLatencyRate
	}
	if c.LatencyDuration == 0 {
		c.LatencyDuration = DefaultLatencyDuration
	}
}

// Validate reports a configuration that cannot run.
func (c PubSubConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Messages < 1 || c.Messages > 1<<36 {
		bad("messages must be between 1 and %d, got %d", int64(1)<<36, c.Messages)
	}
	if c.Keys < 1 || c.Keys > 1_000_000 {
		bad("keys must be between 1 and 1000000, got %d", c.Keys)
	}
	if c.Window < time.Second || c.Window%time.Second != 0 {
		bad("window must be a whole number of seconds, at least 1s, got %s", c.Window)
	}
	if c.Workers < 1 || c.Workers > 64 {
		bad("workers must be between 1 and 64, got %d", c.Workers)
	}
	if c.CheckpointInterval < 10*time.Millisecond {
		bad("checkpoint interval must be at least 10ms, got %s", c.CheckpointInterval)
	}
	if c.LatencyRate < 1 || c.LatencyRate > 1_000_000 {
		bad("latency rate must be between 1 and 1000000 messages/s, got %d", c.LatencyRate)
	}
	if c.LatencyDuration < 100*time.Millisecond {
		bad("latency duration must be at least 100ms, got %s", c.LatencyDuration)
	}
	return errors.Join(errs...)
}

// PubSubVariant is one child process of pubsub-to-sql.
type PubSubVariant string

// The variants of pubsub-to-sql.
const (
	// VariantPublish pre-publishes the messages into the broker store the
	// other variants reopen; it runs once per invocation.
	VariantPublish PubSubVariant = "publish"
	// VariantRaw is a durable consumer that fetches every message and
	// acknowledges cumulatively once per batch: the broker's own limit.
	VariantRaw PubSubVariant = "raw"
	// VariantPipeline runs ReadFromPubSub → fixed windows → Combine sum per
	// key → WriteToSql upsert, checkpointing every CheckpointInterval.
	VariantPipeline PubSubVariant = "pipeline"
	// VariantPipelineFinalCP is the same pipeline with one checkpoint only,
	// the final one after the drain: the reference for checkpoint overhead.
	VariantPipelineFinalCP PubSubVariant = "pipeline-final-cp"
	// VariantLatency publishes at LatencyRate for LatencyDuration through
	// a stateless ReadFromPubSub → WriteToSql append pipeline and measures
	// publish-to-committed-row latency.
	VariantLatency PubSubVariant = "latency"
	// VariantRehearse rehearses the pipeline variant's pipeline against
	// itself over the pre-published messages, as weir rehearse --since
	// does: the messages read from the topic by sequence (no
	// subscription), the old pipeline run twice and the new once in
	// sandboxes, and their outputs compared. Not run by default: it holds
	// the messages in memory (select it with --variants).
	VariantRehearse PubSubVariant = "rehearse"
)

// PubSubVariants returns the measured variants in the order they run.
func PubSubVariants() []PubSubVariant {
	return []PubSubVariant{VariantRaw, VariantPipeline, VariantPipelineFinalCP, VariantLatency}
}

// ParsePubSubVariant parses a variant name.
func ParsePubSubVariant(name string) (PubSubVariant, error) {
	v := PubSubVariant(name)
	switch v {
	case VariantPublish, VariantRaw, VariantPipeline, VariantPipelineFinalCP, VariantLatency, VariantRehearse:
		return v, nil
	}
	names := []string{string(VariantPublish), string(VariantRehearse)}
	for _, v := range PubSubVariants() {
		names = append(names, string(v))
	}
	return "", fmt.Errorf("unknown variant %q (want one of %s)", name, strings.Join(names, ", "))
}

// needsPublished reports whether v consumes the pre-published messages.
func (v PubSubVariant) needsPublished() bool {
	return v == VariantRaw || v == VariantPipeline || v == VariantPipelineFinalCP || v == VariantRehearse
}

// PubSubOutcome is what one child of pubsub-to-sql did, printed as one
// line of JSON. Durations are in nanoseconds.
type PubSubOutcome struct {
	Variant string `json:"variant"`
	Run     int    `json:"run"`
	// Messages is how many messages were published (publish, latency) or
	// consumed (raw, pipelines).
	Messages int64 `json:"messages"`
	// ElapsedNanos is the timed region: publishing; or from the first fetch
	// (raw) or the start of the execution (pipelines) until the last
	// acknowledgement (raw) or the final commit (pipelines); for latency
	// the whole run, publishing included.
	ElapsedNanos int64 `json:"elapsed_ns"`
	// CPUNanos is this process's user + system CPU time over the timed
	// region (0 where the platform does not report it).
	CPUNanos int64 `json:"cpu_ns"`

	// Checkpoints are the checkpoints taken (the final one included);
	// CheckpointNanos is their total duration (barrier, Pebble write,
	// commit of sinks and sources), BarrierNanos the part spent in
	// Execution.Checkpoint, CheckpointMaxNanos the longest.
	Checkpoints        int   `json:"checkpoints,omitempty"`
	CheckpointNanos    int64 `json:"checkpoint_ns,omitempty"`
	BarrierNanos       int64 `json:"barrier_ns,omitempty"`
	CheckpointMaxNanos int64 `json:"checkpoint_max_ns,omitempty"`

	// Rows, Total and Count are what the SQL table holds after the run:
	// rows, the sum of the window totals, the sum of the window counts.
	// Checksum mixes every row's window, key and total.
	Rows     int64  `json:"rows,omitempty"`
	Total    int64  `json:"total,omitempty"`
	Count    int64  `json:"count,omitempty"`
	Checksum uint64 `json:"checksum,omitempty"`

	// Latency percentiles from publish to committed row, over Samples rows.
	LatencyP50Nanos int64 `json:"latency_p50_ns,omitempty"`
	LatencyP99Nanos int64 `json:"latency_p99_ns,omitempty"`
	LatencyMaxNanos int64 `json:"latency_max_ns,omitempty"`
	Samples         int64 `json:"samples,omitempty"`
	// PublishNanos is how long the latency variant published.
	PublishNanos int64 `json:"publish_ns,omitempty"`
	// RowsCompared and Differences are the rehearse variant's comparison:
	// rows compared (each run's rows), differences found (0: the pipeline
	// agrees with itself).
	RowsCompared int64 `json:"rows_compared,omitempty"`
	Differences  int64 `json:"differences,omitempty"`
}

// Elapsed returns the timed region's wall time.
func (o PubSubOutcome) Elapsed() time.Duration { return time.Duration(o.ElapsedNanos) }

// ExpectedSums is what the windowed per-key sum of the published messages
// must leave in the table: per (window start, key), the sum and the count.
type ExpectedSums struct {
	Rows     int64
	Total    int64
	Count    int64
	Checksum uint64
	cells    map[windowKey]sumCount
}

type windowKey struct {
	start mtime.Time
	key   int64
}

type sumCount struct{ sum, n int64 }

// windowStart returns the start of the fixed window of size that holds t.
func windowStart(t mtime.Time, size mtime.Duration) mtime.Time {
	s := mtime.Time(size)
	m := t % s
	if m < 0 {
		m += s
	}
	return t - m
}

// ComputeExpectedSums replays the published messages of cfg into the
// expected window sums.
func ComputeExpectedSums(cfg PubSubConfig) ExpectedSums {
	cfg.EnsureDefaults()
	size := mtime.FromDuration(cfg.Window)
	e := ExpectedSums{cells: make(map[windowKey]sumCount, cfg.Keys*2)}
	for i := int64(0); i < cfg.Messages; i++ {
		k, a := Event(i, cfg.Keys)
		wk := windowKey{start: windowStart(EventTime(i), size), key: k}
		c := e.cells[wk]
		c.sum += a
		c.n++
		e.cells[wk] = c
		e.Total += a
	}
	e.Count = cfg.Messages
	e.Rows = int64(len(e.cells))
	for wk, c := range e.cells {
		e.Checksum += resultMix(wk.start, wk.key, c.sum)
	}
	return e
}

// eventKey is the key string of key number k, as in the YAML Generate
// source.
func eventKey(k int64) string { return "key-" + strconv.FormatInt(k, 10) }

// parseEventKey is the inverse of eventKey.
func parseEventKey(s string) (int64, bool) {
	num, ok := strings.CutPrefix(s, "key-")
	if !ok {
		return 0, false
	}
	k, err := strconv.ParseInt(num, 10, 64)
	return k, err == nil
}

// AppendEventMessage appends message i of the workload to dst: a JSON
// object {"key": "key-K", "amount": A, "ts": RFC 3339 with milliseconds}
// with Event's key and amount and EventTime's time (event time advances
// 1 ms per message), padded to MessageSize bytes with a "pad" field.
func AppendEventMessage(dst []byte, i, keys int64) []byte {
	k, a := Event(i, keys)
	start := len(dst)
	dst = append(dst, `{"key":"key-`...)
	dst = strconv.AppendInt(dst, k, 10)
	dst = append(dst, `","amount":`...)
	dst = strconv.AppendInt(dst, a, 10)
	dst = append(dst, `,"ts":"`...)
	dst = EventTime(i).ToTime().UTC().AppendFormat(dst, "2006-01-02T15:04:05.000Z")
	dst = append(dst, '"')
	return pad(dst, start)
}

// appendLatencyMessage appends a latency probe: {"seq": N, "pub_us":
// publish wall time in Unix microseconds}, padded to MessageSize bytes.
func appendLatencyMessage(dst []byte, seq int64, pubMicros int64) []byte {
	start := len(dst)
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, `,"pub_us":`...)
	dst = strconv.AppendInt(dst, pubMicros, 10)
	return pad(dst, start)
}

// pad closes the JSON object that starts at dst[start], with a "pad"
// string field that makes it MessageSize bytes long when it is shorter.
func pad(dst []byte, start int) []byte {
	const field = `,"pad":""}`
	if n := MessageSize - (len(dst) - start) - len(field); n > 0 {
		dst = append(dst, `,"pad":"`...)
		for range n {
			dst = append(dst, 'x')
		}
		return append(dst, `"}`...)
	}
	return append(dst, '}')
}
