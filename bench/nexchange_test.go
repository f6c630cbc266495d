package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestNexmarkChange runs the change benchmark small (a few seconds at a
// low rate, every kind of change once), with the YAML query and with the
// Go SDK's as a Go program's job, and checks the report's structure:
// every change happened (a new generation whose results carry the new
// tag, the new worker count, a READY snapshot) and results kept arriving
// after each. It sets no timing threshold.
func TestNexmarkChange(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a job service for several seconds")
	}
	for _, tc := range []struct {
		language string
		sdk      bool
	}{{"yaml", false}, {"go", true}} {
		t.Run(tc.language, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			changes := []string{ChangeUpdate, ChangeRescale, ChangeSnapshot}
			out, err := RunNexmarkChange(ctx, ChangeConfig{Query: "q5", SDK: tc.sdk, Rate: 2000, Duration: 8 * time.Second,
				Changes: changes, Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if out.Language != tc.language {
				t.Errorf("report's language %q, want %q", out.Language, tc.language)
			}
			checkChangeReport(t, out, changes)
		})
	}
}

// checkChangeReport checks the report of a run that made changes
// (update, rescale, snapshot) in this order.
func checkChangeReport(t *testing.T, out ChangeOutcome, changes []string) {
	t.Helper()
	if len(out.Changes) != len(changes) {
		t.Fatalf("report has %d changes, want %d: %+v", len(out.Changes), len(changes), out.Changes)
	}
	if len(out.Samples) == 0 || out.Results == 0 {
		t.Errorf("report has %d samples and %d results, want both", len(out.Samples), out.Results)
	}
	for i, c := range out.Changes {
		if c.Kind != changes[i] {
			t.Errorf("change %d is %q, want %q", i, c.Kind, changes[i])
		}
		if c.FirstResultAfterMillis < 0 {
			t.Errorf("%s: no result of the current pipeline arrived after it", c.Kind)
		}
		if c.JobID == "" || c.Detail == "" {
			t.Errorf("%s: no job or detail: %+v", c.Kind, c)
		}
	}
	up, re, sn := out.Changes[0], out.Changes[1], out.Changes[2]
	if up.Generation != 2 || !strings.Contains(up.Detail, "gen 2") {
		t.Errorf("update: generation %d (%s), want 2", up.Generation, up.Detail)
	}
	if re.WorkersFrom != 1 || re.WorkersTo != 2 {
		t.Errorf("rescale: workers %d -> %d, want 1 -> 2", re.WorkersFrom, re.WorkersTo)
	}
	if re.JobID != up.JobID {
		t.Errorf("rescale: job %s, want the updated job %s (a rescale keeps the job)", re.JobID, up.JobID)
	}
	if sn.SnapshotID == "" || sn.JobID != up.JobID {
		t.Errorf("snapshot: id %q of job %s, want one of %s", sn.SnapshotID, sn.JobID, up.JobID)
	}
}

// TestNexmarkChangeRefusesGo: a Go query whose results' timestamps say
// nothing of an event's age (q12), an unknown query, or windows of a
// fraction of a second, are refused
// before anything runs.
func TestNexmarkChangeRefusesGo(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  ChangeConfig
		want string
	}{
		{"processing-time query", ChangeConfig{Query: "q12", SDK: true, Rate: 1000}, "does not emit while its input is unbounded"},
		{"unknown query", ChangeConfig{Query: "q99", SDK: true, Rate: 1000}, "does not emit while its input is unbounded"},
		{"sub-second window", ChangeConfig{Query: "q5", SDK: true, Rate: 1000, WindowSize: 1500 * time.Millisecond}, "whole seconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Dir = t.TempDir()
			_, err := RunNexmarkChange(context.Background(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestDipAndBacklog: the dip's depth and duration and the backlog of a
// sampled throughput against the rate before a change at 1 s.
func TestDipAndBacklog(t *testing.T) {
	series := func(rates ...float64) []ThroughputSample {
		s := make([]ThroughputSample, len(rates))
		for i, r := range rates {
			s[i] = ThroughputSample{AtSeconds: 1 + 0.1*float64(i+1), EventsPerSecond: r}
		}
		return s
	}
	const at, next = time.Second, 3 * time.Second
	cases := []struct {
		name        string
		samples     []ThroughputSample
		minPercent  float64
		dipMillis   float64
		backlogMsec float64
		peak        time.Duration
	}{
		{"steady", series(100, 95, 105, 100), 95, 0, 5, 1200 * time.Millisecond},
		{"stall then catch-up", series(100, 0, 0, 200, 200, 100, 100), 0, 300, 200, 1300 * time.Millisecond},
		{"deepest dip counts", series(50, 100, 100, 100, 10, 100, 100, 100), 10, 500, 140, 1500 * time.Millisecond},
		{"not back", series(100, 0, 50), 0, -1, 150, 1300 * time.Millisecond},
		{"no samples", nil, 0, -1, 0, time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			minPercent, dipMillis := dip(c.samples, 100*time.Millisecond, at, next, 100)
			if minPercent != c.minPercent || dipMillis != c.dipMillis {
				t.Errorf("dip = %v%%, %v ms; want %v%%, %v ms", minPercent, dipMillis, c.minPercent, c.dipMillis)
			}
			got, peak := backlog(c.samples, at, next, 100)
			if got < c.backlogMsec-1e-6 || got > c.backlogMsec+1e-6 || peak != c.peak {
				t.Errorf("backlog = %v ms, peak at %v; want %v ms, at %v", got, peak, c.backlogMsec, c.peak)
			}
		})
	}
}

// TestSustained: the events read over the second half of the samples, per
// second; bursts between stalls count at their average, not their rate.
func TestSustained(t *testing.T) {
	steady := []ThroughputSample{{AtSeconds: 0.1, EventsPerSecond: 100}, {AtSeconds: 0.2, EventsPerSecond: 100},
		{AtSeconds: 0.3, EventsPerSecond: 100}, {AtSeconds: 0.4, EventsPerSecond: 100}}
	var bursts []ThroughputSample
	for i := range 24 {
		rate := 0.0
		if i%4 == 0 {
			rate = 1000 // one sample in four reads, at 1,000 a second
		}
		bursts = append(bursts, ThroughputSample{AtSeconds: float64(i+1) / 10, EventsPerSecond: rate})
	}
	for _, tc := range []struct {
		name    string
		samples []ThroughputSample
		want    float64
	}{
		{"none", nil, 0},
		{"one", steady[:1], 0},
		{"steady", steady, 100},
		{"bursts", bursts, 250},
	} {
		got := sustained(tc.samples)
		if d := got - tc.want; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: %g events/s, want %g", tc.name, got, tc.want)
		}
	}
}
