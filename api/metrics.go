package api

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-dev/weir/service"
)

// collector exports the service's metrics at scrape time: per job and per
// step, with Dataflow's meanings (see service.JobMetrics).
type collector struct {
	svc *service.Service

	jobs           *prometheus.Desc
	jobSystemLag   *prometheus.Desc
	jobWMAge       *prometheus.Desc
	jobBacklog     *prometheus.Desc
	jobDeadLetters *prometheus.Desc
	stepIn         *prometheus.Desc
	stepOut        *prometheus.Desc
	stepRejects    *prometheus.Desc
	stepDropped    *prometheus.Desc
	stepWatermark  *prometheus.Desc
	stepWMAge      *prometheus.Desc
	stepThroughput *prometheus.Desc
	stepSystemLag  *prometheus.Desc
	stepBacklog    *prometheus.Desc
	stepTimers     *prometheus.Desc
}

func newCollector(svc *service.Service) *collector {
	job := []string{"job_id", "job_name"}
	step := []string{"job_id", "job_name", "step"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &collector{
		svc:            svc,
		jobs:           d("weir_jobs", "Number of jobs known to the service, by state and type.", []string{"state", "type"}),
		jobSystemLag:   d("weir_job_system_lag_seconds", "Largest system lag of the job's steps: approximately the longest time an element has been waiting.", job),
		jobWMAge:       d("weir_job_data_watermark_age_seconds", "Now minus the job's data watermark (the minimum watermark of its sources).", job),
		jobBacklog:     d("weir_job_backlog_elements", "Unread elements of the job's sources that report a backlog.", job),
		jobDeadLetters: d("weir_job_dead_letters_total", "Rejects of steps without an error output sent to the dead-letter topic (or counted).", job),
		stepIn:         d("weir_step_elements_in_total", "Elements the step consumed.", step),
		stepOut:        d("weir_step_elements_out_total", "Elements the step produced.", step),
		stepRejects:    d("weir_step_rejects_total", "Elements the step rejected.", step),
		stepDropped:    d("weir_step_dropped_late_elements_total", "Elements dropped because they were later than the allowed lateness.", step),
		stepWatermark:  d("weir_step_watermark_seconds", "Output watermark of the step, in seconds since the Unix epoch (finite watermarks only).", step),
		stepWMAge:      d("weir_step_data_watermark_age_seconds", "Now minus the step's output watermark.", step),
		stepThroughput: d("weir_step_throughput_elements_per_second", "Elements consumed per second over the last sampling interval.", step),
		stepSystemLag:  d("weir_step_system_lag_seconds", "Approximately the longest time an element has been waiting for the step.", step),
		stepBacklog:    d("weir_step_backlog_elements", "Unread elements of a source step, when it reports them.", step),
		stepTimers:     d("weir_step_pending_timers", "Timers set and not yet fired, when the runner reports them.", step),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.jobs, c.jobSystemLag, c.jobWMAge, c.jobBacklog, c.jobDeadLetters,
		c.stepIn, c.stepOut, c.stepRejects, c.stepDropped, c.stepWatermark, c.stepWMAge, c.stepThroughput,
		c.stepSystemLag, c.stepBacklog, c.stepTimers} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	if jobs, err := c.svc.List(service.StatusAll); err == nil {
		type key struct {
			state service.JobState
			typ   service.JobType
		}
		counts := map[key]int{}
		for _, j := range jobs {
			counts[key{j.State, j.Type}]++
		}
		for k, n := range counts {
			ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(n), k.state.String(), string(k.typ))
		}
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for j, m := range c.svc.RunningMetrics() {
		gauge(c.jobSystemLag, m.SystemLagSeconds, j.ID, j.Name)
		if m.DataWatermarkAgeSeconds != nil {
			gauge(c.jobWMAge, *m.DataWatermarkAgeSeconds, j.ID, j.Name)
		}
		if m.BacklogElements != nil {
			gauge(c.jobBacklog, float64(*m.BacklogElements), j.ID, j.Name)
		}
		counter(c.jobDeadLetters, m.DeadLetters, j.ID, j.Name)
		for _, st := range m.Steps {
			l := []string{j.ID, j.Name, st.Name}
			counter(c.stepIn, st.ElementsIn, l...)
			counter(c.stepOut, st.ElementsOut, l...)
			counter(c.stepRejects, st.Rejects, l...)
			counter(c.stepDropped, st.DroppedLateElements, l...)
			gauge(c.stepThroughput, st.ThroughputPerSecond, l...)
			gauge(c.stepSystemLag, st.SystemLagSeconds, l...)
			if st.DataWatermarkAgeSeconds != nil && st.WatermarkMillis != nil {
				gauge(c.stepWatermark, float64(*st.WatermarkMillis)/1000, l...)
				gauge(c.stepWMAge, *st.DataWatermarkAgeSeconds, l...)
			}
			if st.BacklogElements != nil {
				gauge(c.stepBacklog, float64(*st.BacklogElements), l...)
			}
			if st.PendingTimers != nil {
				gauge(c.stepTimers, float64(*st.PendingTimers), l...)
			}
		}
	}
}
