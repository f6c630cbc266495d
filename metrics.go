package weir

import "github.com/weir-dev/weir/runner/contract"

// MetricsContext is what step code updates user-defined metrics through:
// a DoFn's *Context or a stateful DoFn's *StateContext.
type MetricsContext interface {
	userMetrics() *contract.UserMetrics
}

func (c *Context) userMetrics() *contract.UserMetrics { return c.pc.Metrics() }

func (c *StateContext[K, Out]) userMetrics() *contract.UserMetrics { return c.sc.Metrics() }

// Counter is a user-defined counter, as Beam's metrics.Counter: a DoFn
// (ParDo, ParDoN, a stateful ParDo) adds to it with Inc, and its value per step — summed
// over the step's workers — is in the run's result (runner's
// StepMetrics.User), in a job's metrics (`weir jobs describe`) and on
// /metrics as weir_user_counter_total{namespace, name}. It counts
// attempts: an element processed again after a restart counts again.
// Declare it once (a package-level value or a field) and use it from any
// worker.
type Counter struct{ name contract.MetricName }

// NewCounter returns the counter namespace/name.
func NewCounter(namespace, name string) Counter {
	return Counter{name: contract.MetricName{Namespace: namespace, Name: name}}
}

// Inc adds n to the counter of the step c belongs to.
func (m Counter) Inc(c MetricsContext, n int64) {
	if um := c.userMetrics(); um != nil {
		um.Inc(m.name, n)
	}
}

// Distribution is a user-defined distribution, as Beam's
// metrics.Distribution: a DoFn records values with Update, and the step's
// count, sum, minimum and maximum are reported as Counter's value is
// (weir_user_distribution_{count,sum,min,max} on /metrics).
type Distribution struct{ name contract.MetricName }

// NewDistribution returns the distribution namespace/name.
func NewDistribution(namespace, name string) Distribution {
	return Distribution{name: contract.MetricName{Namespace: namespace, Name: name}}
}

// Update records v in the distribution of the step c belongs to.
func (m Distribution) Update(c MetricsContext, v int64) {
	if um := c.userMetrics(); um != nil {
		um.Update(m.name, v)
	}
}
