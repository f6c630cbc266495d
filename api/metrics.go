package api

import (
	"context"
	"math"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-dev/weir/service"
)

// MetricDef documents one metric of GET /metrics (docs/METRICS.md lists
// the same; a test checks both against a scrape).
type MetricDef struct {
	Name   string
	Type   string // counter, gauge or histogram
	Labels []string
	Help   string
}

var (
	jobLabels  = []string{"job_id", "job_name"}
	stepLabels = []string{"job_id", "job_name", "step"}
)

// The metrics of GET /metrics, with Dataflow's meanings (see
// service.JobMetrics). Indices into metricDefs name them in Collect.
const (
	mJobs = iota
	mJobSystemLag
	mJobWMAge
	mJobBacklog
	mJobBacklogBytes
	mJobBacklogTime
	mJobDeadLetters
	mJobSinkWait
	mJobSinkBuffered
	mStepIn
	mStepProduced
	mStepRejects
	mStepDropped
	mStepWatermark
	mStepWMAge
	mStepSystemLag
	mStepBacklog
	mStepTimersPending
	mStepKeys
	mStepCatchUpRead
	mStepCatchUpHoldUntil
	mStepCatchUpCaughtUp
	mStepCatchUpExpired
	mStepIDConflicts
	mCheckpointDuration
	mCheckpointSize
	mTopicIDConflicts
	mBrokerStorageRecoveries
	mBrokerStorageFailed
	mSubscriptionBacklog
	mSubscriptionOldestAge
	mSQLMerges
	mSQLMergeRows
	mUserCounter
	mUserDistCount
	mUserDistSum
	mUserDistMin
	mUserDistMax
)

// userLabels label a step's user-defined metric (the Go SDK's Counter and
// Distribution): the step's labels, its namespace and its name.
var userLabels = []string{"job_id", "job_name", "step", "namespace", "name"}

var metricDefs = []MetricDef{
	mJobs:            {"weir_jobs", "gauge", []string{"state", "type"}, "Number of jobs known to the service, by state and type."},
	mJobSystemLag:    {"weir_job_system_lag_seconds", "gauge", jobLabels, "Largest system lag of the job's steps: approximately the longest time an element has been waiting (Dataflow's system lag)."},
	mJobWMAge:        {"weir_job_data_watermark_age_seconds", "gauge", jobLabels, "Now minus the job's data watermark, the minimum watermark of its sources (Dataflow's data freshness)."},
	mJobBacklog:      {"weir_job_backlog_elements", "gauge", jobLabels, "Unread elements of the job's sources that report a backlog."},
	mJobBacklogBytes: {"weir_job_backlog_bytes", "gauge", jobLabels, "Estimated size of the unread elements of the job's sources that report one."},
	mJobBacklogTime:  {"weir_job_estimated_backlog_processing_time_seconds", "gauge", jobLabels, "Backlog elements divided by the sources' current throughput: the time to read the backlog at the current rate (+Inf while nothing is read)."},
	mJobDeadLetters:  {"weir_job_dead_letters_total", "counter", jobLabels, "Rejects of steps without an error output sent to the dead-letter topic (or counted)."},
	mJobSinkWait: {"weir_job_sink_wait_seconds_total", "counter", jobLabels,
		"Time the job's sources waited for its sinks, summed over its workers, since the execution started: its buffering sinks held more than the server's --max-sink-buffer, so it read nothing until a checkpoint committed them."},
	mJobSinkBuffered: {"weir_job_sink_buffered_bytes", "gauge", jobLabels,
		"What the job's buffering sinks (Pub/Sub, SQL, JDBC, Iceberg) hold now, to be committed by the next checkpoint; only for jobs with one."},
	mStepIn:        {"weir_step_elements_in_total", "counter", stepLabels, "Elements the step consumed."},
	mStepProduced:  {"weir_step_elements_produced_total", "counter", stepLabels, "Elements the step produced (Dataflow's ElementCount of the step's output)."},
	mStepRejects:   {"weir_step_rejects_total", "counter", stepLabels, "Elements the step rejected."},
	mStepDropped:   {"weir_step_dropped_late_elements_total", "counter", stepLabels, "Elements dropped because they were later than the allowed lateness."},
	mStepWatermark: {"weir_step_watermark_timestamp_seconds", "gauge", stepLabels, "Output watermark of the step, in seconds since the Unix epoch (finite watermarks only)."},
	mStepWMAge:     {"weir_step_data_watermark_age_seconds", "gauge", stepLabels, "Now minus the step's output watermark."},
	mStepSystemLag: {"weir_step_system_lag_seconds", "gauge", stepLabels, "Approximately the longest time an element has been waiting for the step."},
	mStepBacklog:   {"weir_step_backlog_elements", "gauge", stepLabels, "Unread elements of a source step, when it reports them."},
	mStepTimersPending: {"weir_step_timers_pending", "gauge", stepLabels,
		"Timers set and not yet fired, of keyed steps (Dataflow's timers pending)."},
	mStepKeys: {"weir_step_keys", "gauge", stepLabels,
		"Keys a keyed step (GroupByKey, Combine, stateful ParDo, windowed aggregation) holds state for."},
	mStepCatchUpRead: {"weir_step_catch_up_read_sequence", "gauge", stepLabels,
		"Last stream sequence a re-reading source (a replacement's re-read) has read; only while it re-reads or after."},
	mStepCatchUpHoldUntil: {"weir_step_catch_up_hold_until_sequence", "gauge", stepLabels,
		"Last sequence the replaced job had read: until the re-reading source has read it, its watermark is held and no pane fires."},
	mStepCatchUpCaughtUp: {"weir_step_catch_up_caught_up", "gauge", stepLabels,
		"1 once the re-reading source has read through weir_step_catch_up_hold_until_sequence, 0 while it still catches up."},
	mStepCatchUpExpired: {"weir_step_catch_up_expired_messages", "gauge", stepLabels,
		"Messages a re-reading source had to read again but found gone from the topic's retention (each gap is a catch_up_expired event)."},
	mStepIDConflicts: {"weir_step_duplicate_id_conflicts_total", "counter", stepLabels,
		"Messages a source dropped as duplicates of an ID seen within its dedupe window although their data differed (an ID reused for another message); since the execution started, only for sources with one."},
	mCheckpointDuration: {"weir_checkpoint_duration_seconds", "histogram", jobLabels, "Time from a checkpoint's barrier to its durable write and sink commit."},
	mCheckpointSize:     {"weir_checkpoint_size_bytes", "histogram", jobLabels, "Encoded size of a checkpoint: changed state entries, source positions and sink parts."},
	mTopicIDConflicts: {"weir_topic_duplicate_id_conflicts_total", "counter", []string{"topic"},
		"Publishes the topic's duplicate window dropped although their content differed from the stored message of their ID (an ID reused for other content), since the server started."},
	mBrokerStorageRecoveries: {"weir_broker_storage_recoveries_total", "counter", nil,
		"Times the embedded broker brought its storage back by itself after a storage failure (a full disk), since the server started."},
	mBrokerStorageFailed: {"weir_broker_storage_failed", "gauge", nil,
		"1 while the embedded broker's storage is failed (a full disk) and publishes are refused, else 0."},
	mSubscriptionBacklog: {"weir_subscription_backlog_messages", "gauge", []string{"subscription", "topic"},
		"Messages of the subscription not yet acknowledged: not delivered yet, or delivered and awaiting acknowledgement (Pub/Sub's num_undelivered_messages)."},
	mSubscriptionOldestAge: {"weir_subscription_oldest_unacked_message_age_seconds", "gauge", []string{"subscription", "topic"},
		"Age of the subscription's oldest unacknowledged message (Pub/Sub's oldest_unacked_message_age); 0 without a backlog."},
	mSQLMerges: {"weir_sql_merges_total", "counter", []string{"table", "result"},
		"Merges of a staged SQL table's staging tables into its principal table (periodic and on demand), by result (ok, failed), since the server started."},
	mSQLMergeRows: {"weir_sql_merge_rows_total", "counter", []string{"table"},
		"Rows the merges of a staged SQL table moved into its principal table, since the server started."},
	mUserCounter: {"weir_user_counter_total", "counter", userLabels,
		"A user-defined counter of the step's code (the Go SDK's Counter), in the job's current execution."},
	mUserDistCount: {"weir_user_distribution_count", "counter", userLabels,
		"Values recorded in a user-defined distribution of the step's code (the Go SDK's Distribution), in the job's current execution."},
	mUserDistSum: {"weir_user_distribution_sum", "counter", userLabels,
		"Sum of the values recorded in a user-defined distribution, in the job's current execution."},
	mUserDistMin: {"weir_user_distribution_min", "gauge", userLabels,
		"Smallest value recorded in a user-defined distribution, in the job's current execution."},
	mUserDistMax: {"weir_user_distribution_max", "gauge", userLabels,
		"Largest value recorded in a user-defined distribution, in the job's current execution."},
}

// messageTimer tells a topic's message's publish time (*pubsub.Broker).
type messageTimer interface {
	MessageTime(ctx context.Context, topic string, seq uint64) (time.Time, bool, error)
}

// scrapeTimeout bounds the broker's answer to one scrape.
const scrapeTimeout = 5 * time.Second

// storageWatcher is a broker that recovers from storage failures
// (*pubsub.Broker).
type storageWatcher interface {
	StorageRecoveries() int64
	StorageFailing() bool
	Embedded() bool
}

// idConflictCounter is a broker that counts the publishes that reused a
// message ID for other content (*pubsub.Broker).
type idConflictCounter interface {
	DuplicateIDConflicts() map[string]int64
}

// MetricDefs returns the metrics GET /metrics exports.
func MetricDefs() []MetricDef {
	out := make([]MetricDef, len(metricDefs))
	copy(out, metricDefs)
	return out
}

// collector exports the service's metrics at scrape time: per job and per
// step, with Dataflow's meanings (see service.JobMetrics).
type collector struct {
	svc   *service.Service
	descs []*prometheus.Desc
	// topics, when set, counts the broker's reused message IDs.
	topics idConflictCounter
	// storage, when set, reports the embedded broker's storage failures.
	storage storageWatcher
	// subs, when set, lists the subscriptions with their backlogs.
	subs PubSub
}

// newCollector returns the collector of svc's metrics and, when ps counts
// them, of the broker's reused message IDs.
func newCollector(svc *service.Service, ps PubSub) *collector {
	c := &collector{svc: svc}
	c.topics, _ = ps.(idConflictCounter)
	c.subs = ps
	if w, ok := ps.(storageWatcher); ok && w.Embedded() {
		c.storage = w
	}
	for _, d := range metricDefs {
		c.descs = append(c.descs, prometheus.NewDesc(d.Name, d.Help, d.Labels, nil))
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	if jobs, err := c.svc.List(service.StatusAll); err == nil {
		type key struct {
			state record.JobState
			typ   record.JobType
		}
		counts := map[key]int{}
		for _, j := range jobs {
			counts[key{j.State, j.Type}]++
		}
		for k, n := range counts {
			ch <- prometheus.MustNewConstMetric(c.descs[mJobs], prometheus.GaugeValue, float64(n), k.state.String(), string(k.typ))
		}
	}
	gauge := func(m int, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[m], prometheus.GaugeValue, v, labels...)
	}
	counter := func(m int, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[m], prometheus.CounterValue, float64(v), labels...)
	}
	names := map[string]string{}
	for j, m := range c.svc.RunningMetrics() {
		names[j.ID] = j.Name
		gauge(mJobSystemLag, m.SystemLagSeconds, j.ID, j.Name)
		if m.DataWatermarkAgeSeconds != nil {
			gauge(mJobWMAge, *m.DataWatermarkAgeSeconds, j.ID, j.Name)
		}
		if m.BacklogElements != nil {
			gauge(mJobBacklog, float64(*m.BacklogElements), j.ID, j.Name)
			est := math.Inf(1)
			if m.EstimatedBacklogProcessingTimeSeconds != nil {
				est = *m.EstimatedBacklogProcessingTimeSeconds
			}
			gauge(mJobBacklogTime, est, j.ID, j.Name)
		}
		if m.BacklogBytes != nil {
			gauge(mJobBacklogBytes, float64(*m.BacklogBytes), j.ID, j.Name)
		}
		counter(mJobDeadLetters, m.DeadLetters, j.ID, j.Name)
		ch <- prometheus.MustNewConstMetric(c.descs[mJobSinkWait], prometheus.CounterValue, m.SinkWaitSeconds, j.ID, j.Name)
		if m.SinkBufferedBytes != nil {
			gauge(mJobSinkBuffered, float64(*m.SinkBufferedBytes), j.ID, j.Name)
		}
		for _, st := range m.Steps {
			l := []string{j.ID, j.Name, st.Name}
			collectCatchUp(gauge, st, l)
			counter(mStepIn, st.ElementsIn, l...)
			counter(mStepProduced, st.ElementsOut, l...)
			counter(mStepRejects, st.Rejects, l...)
			counter(mStepDropped, st.DroppedLateElements, l...)
			collectUserMetrics(gauge, counter, st, l)
			gauge(mStepSystemLag, st.SystemLagSeconds, l...)
			if st.DataWatermarkAgeSeconds != nil && st.WatermarkMillis != nil {
				gauge(mStepWatermark, float64(*st.WatermarkMillis)/1000, l...)
				gauge(mStepWMAge, *st.DataWatermarkAgeSeconds, l...)
			}
			if st.BacklogElements != nil {
				gauge(mStepBacklog, float64(*st.BacklogElements), l...)
			}
			if st.PendingTimers != nil {
				gauge(mStepTimersPending, float64(*st.PendingTimers), l...)
			}
			if st.Keys != nil {
				gauge(mStepKeys, float64(*st.Keys), l...)
			}
			if st.DuplicateIDConflicts != nil {
				counter(mStepIDConflicts, *st.DuplicateIDConflicts, l...)
			}
		}
	}
	if c.topics != nil {
		for topic, n := range c.topics.DuplicateIDConflicts() {
			counter(mTopicIDConflicts, n, topic)
		}
	}
	if c.subs != nil {
		ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
		collectSubscriptions(ctx, gauge, c.subs, time.Now())
		cancel()
	}
	if c.storage != nil {
		counter(mBrokerStorageRecoveries, c.storage.StorageRecoveries())
		failed := 0.0
		if c.storage.StorageFailing() {
			failed = 1
		}
		gauge(mBrokerStorageFailed, failed)
	}
	for table, n := range c.svc.SQLMergeCounts() {
		counter(mSQLMerges, n.Merges, table, "ok")
		counter(mSQLMerges, n.Failures, table, "failed")
		counter(mSQLMergeRows, n.Rows, table)
	}
	for id, h := range c.svc.CheckpointHistograms() {
		name, ok := names[id]
		if !ok {
			continue // ended between the two reads
		}
		ch <- prometheus.MustNewConstHistogram(c.descs[mCheckpointDuration], h.Duration.Count, h.Duration.Sum, h.Duration.Buckets, id, name)
		ch <- prometheus.MustNewConstHistogram(c.descs[mCheckpointSize], h.Size.Count, h.Size.Sum, h.Size.Buckets, id, name)
	}
}

// collectSubscriptions exports every subscription's backlog and the age
// at now of its oldest unacknowledged message (the one after its
// acknowledgement floor) through gauge; a broker that does not answer
// within ctx exports none.
func collectSubscriptions(ctx context.Context, gauge func(m int, v float64, labels ...string), ps PubSub, now time.Time) {
	subs, err := ps.ListSubscriptions(ctx, "")
	if err != nil {
		return
	}
	timer, _ := ps.(messageTimer)
	for _, s := range subs {
		gauge(mSubscriptionBacklog, float64(s.Backlog), s.Name, s.Topic)
		if timer == nil {
			continue
		}
		age := 0.0
		if s.Backlog > 0 {
			t, ok, err := timer.MessageTime(ctx, s.Topic, s.AckFloor+1)
			if err != nil || !ok {
				continue // gone from retention, or no answer: no age rather than a wrong one
			}
			age = max(0, now.Sub(t).Seconds())
		}
		gauge(mSubscriptionOldestAge, age, s.Name, s.Topic)
	}
}

// collectCatchUp exports the catch-up progress of step st (labels l), when
// it re-reads its topic, through gauge.
func collectCatchUp(gauge func(m int, v float64, labels ...string), st record.StepMetrics, l []string) {
	c := st.CatchUp
	if c == nil {
		return
	}
	gauge(mStepCatchUpRead, float64(c.ReadSequence), l...)
	gauge(mStepCatchUpHoldUntil, float64(c.HoldUntil), l...)
	caught := 0.0
	if c.CaughtUp {
		caught = 1
	}
	gauge(mStepCatchUpCaughtUp, caught, l...)
	gauge(mStepCatchUpExpired, float64(c.ExpiredMessages), l...)
}

// collectUserMetrics exports a step's user-defined metrics (the Go SDK's
// Counter and Distribution) under the step's labels l, its namespace and
// its name.
func collectUserMetrics(gauge func(m int, v float64, labels ...string), counter func(m int, v int64, labels ...string), st record.StepMetrics, l []string) {
	for _, um := range st.UserMetrics {
		ul := append(append([]string(nil), l...), um.Namespace, um.Name)
		switch {
		case um.Value != nil:
			counter(mUserCounter, *um.Value, ul...)
		case um.Count != nil && um.Sum != nil && um.Min != nil && um.Max != nil:
			counter(mUserDistCount, *um.Count, ul...)
			counter(mUserDistSum, *um.Sum, ul...)
			gauge(mUserDistMin, float64(*um.Min), ul...)
			gauge(mUserDistMax, float64(*um.Max), ul...)
		}
	}
}
