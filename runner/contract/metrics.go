package contract

import (
	"sort"
	"sync"
)

// MetricName names a user-defined metric: its namespace and name, as
// Beam's Metrics API does.
type MetricName struct {
	Namespace string
	Name      string
}

// Kinds of UserMetric.
const (
	MetricCounter      = "counter"
	MetricDistribution = "distribution"
)

// UserMetric is the value of one user-defined metric of a step: a
// counter's Value, or a distribution's Count, Sum, Min and Max.
type UserMetric struct {
	MetricName
	Kind  string
	Value int64
	Count int64
	Sum   int64
	Min   int64
	Max   int64
}

// UserMetrics are the counters and distributions a step's code updates
// (Beam's Metrics API), one set per step shared by its instances on every
// worker. They count attempts: an element processed again after a restart
// from a checkpoint counts again in the new execution. Safe for
// concurrent use; the zero value is empty.
type UserMetrics struct {
	mu      sync.Mutex // a leaf: nothing is called with it held
	metrics map[MetricName]*UserMetric
}

func (m *UserMetrics) get(name MetricName, kind string) *UserMetric {
	if m.metrics == nil {
		m.metrics = map[MetricName]*UserMetric{}
	}
	um := m.metrics[name]
	if um == nil {
		um = &UserMetric{MetricName: name, Kind: kind}
		m.metrics[name] = um
	}
	return um
}

// Inc adds n to counter name.
func (m *UserMetrics) Inc(name MetricName, n int64) {
	m.mu.Lock()
	um := m.get(name, MetricCounter)
	um.Value += n
	m.mu.Unlock()
}

// Update adds v to distribution name.
func (m *UserMetrics) Update(name MetricName, v int64) {
	m.mu.Lock()
	um := m.get(name, MetricDistribution)
	if um.Count == 0 || v < um.Min {
		um.Min = v
	}
	if um.Count == 0 || v > um.Max {
		um.Max = v
	}
	um.Count++
	um.Sum += v
	m.mu.Unlock()
}

// Snapshot returns every metric's value, by namespace and name; nil when
// none was updated.
func (m *UserMetrics) Snapshot() []UserMetric {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.metrics) == 0 {
		return nil
	}
	out := make([]UserMetric, 0, len(m.metrics))
	for _, um := range m.metrics {
		out = append(out, *um)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}
