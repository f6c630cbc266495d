package schedules

import (
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"
)

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func tp(s string) *time.Time { t := ts(s); return &t }

func TestCadence(t *testing.T) {
	cases := []struct {
		name, every, cron, start string
		wantFirst, wantEnd       string
		wantTemplate             string
		wantErr                  string
	}{
		{name: "daily", every: "24h", start: "2026-12-01T00:00:00Z", wantFirst: "2026-12-01T00:00:00Z", wantEnd: "2026-12-02T00:00:00Z", wantTemplate: "{YYYY}-{MM}-{DD}"},
		{name: "hourly", every: "1h", start: "2026-12-01T05:00:00Z", wantFirst: "2026-12-01T05:00:00Z", wantEnd: "2026-12-01T06:00:00Z", wantTemplate: "{YYYY}-{MM}-{DD}T{HH}"},
		{name: "quarter hours", every: "15m", start: "2026-12-01T05:15:00Z", wantFirst: "2026-12-01T05:15:00Z", wantEnd: "2026-12-01T05:30:00Z", wantTemplate: "{YYYY}-{MM}-{DD}T{HH}{mm}"},
		{name: "daily not at midnight", every: "24h", start: "2026-12-01T06:00:00Z", wantFirst: "2026-12-01T06:00:00Z", wantEnd: "2026-12-02T06:00:00Z", wantTemplate: "{YYYY}-{MM}-{DD}T{HH}"},
		{name: "cron at two", cron: "0 2 * * *", start: "2026-12-01T00:00:00Z", wantFirst: "2026-12-01T02:00:00Z", wantEnd: "2026-12-02T02:00:00Z", wantTemplate: "{YYYY}-{MM}-{DD}T{HH}"},
		{name: "cron daily", cron: "@daily", start: "2026-12-01T00:00:00Z", wantFirst: "2026-12-01T00:00:00Z", wantEnd: "2026-12-02T00:00:00Z", wantTemplate: "{YYYY}-{MM}-{DD}"},
		{name: "cron weekdays", cron: "0 0 * * 1-5", start: "2026-12-04T00:00:00Z", wantFirst: "2026-12-04T00:00:00Z", wantEnd: "2026-12-07T00:00:00Z", wantTemplate: "{YYYY}-{MM}-{DD}"},
		{name: "both", every: "1h", cron: "@daily", start: "2026-12-01T00:00:00Z", wantErr: "not both"},
		{name: "neither", start: "2026-12-01T00:00:00Z", wantErr: "needs --every"},
		{name: "too short", every: "10s", start: "2026-12-01T00:00:00Z", wantErr: "shorter than"},
		{name: "not a duration", every: "daily", start: "2026-12-01T00:00:00Z", wantErr: "not a duration"},
		{name: "bad cron", cron: "0 2 * *", start: "2026-12-01T00:00:00Z", wantErr: "not a cron expression"},
		{name: "cron every", cron: "@every 1h", start: "2026-12-01T00:00:00Z", wantErr: "use --every"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, first, err := ParseCadence(tc.every, tc.cron, ts(tc.start))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !first.Equal(ts(tc.wantFirst)) {
				t.Errorf("first partition starts %s, want %s", first, tc.wantFirst)
			}
			if end := c.End(first); !end.Equal(ts(tc.wantEnd)) {
				t.Errorf("first partition ends %s, want %s", end, tc.wantEnd)
			}
			if got := DefaultTemplate(c); got != tc.wantTemplate {
				t.Errorf("default template %q, want %q", got, tc.wantTemplate)
			}
			if err := CheckTemplate(DefaultTemplate(c), c); err != nil {
				t.Errorf("the default template is refused: %v", err)
			}
		})
	}
}

func TestTemplates(t *testing.T) {
	c, _, err := ParseCadence("1h", "", ts("2026-12-01T00:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckTemplate("{YYYY}-{MM}-{DD}", c); err == nil || !strings.Contains(err.Error(), "the same ID") {
		t.Errorf("a daily template for hourly partitions: %v", err)
	}
	if err := CheckTemplate("{YYYY}/{MM}", c); err == nil || !strings.Contains(err.Error(), "not valid") {
		t.Errorf("a template with '/': %v", err)
	}
	start := ts("2026-12-01T07:00:00Z")
	if got := Expand("/data/in/{YYYY}-{MM}-{DD}/{HH}/*.jsonl", start, "x"); got != "/data/in/2026-12-01/07/*.jsonl" {
		t.Errorf("expanded %q", got)
	}
	if got := Expand("/data/{partition}/*.csv", start, "2026-12-01T07"); got != "/data/2026-12-01T07/*.csv" {
		t.Errorf("expanded %q", got)
	}
	if s, ok := FindPartition("{YYYY}-{MM}-{DD}T{HH}", c, "2026-12-01T07", ts("2026-12-02T00:00:00Z")); !ok || !s.Equal(start) {
		t.Errorf("found %s %v", s, ok)
	}
	if _, ok := FindPartition("{YYYY}-{MM}-{DD}T{HH}", c, "2026-12-05T07", ts("2026-12-02T00:00:00Z")); ok {
		t.Error("found a partition beyond the limit")
	}
	for _, tc := range []struct{ every, cron, now, want string }{
		{every: "24h", now: "2026-12-03T06:18:00Z", want: "2026-12-03T00:00:00Z"},
		{every: "1h", now: "2026-12-03T06:18:00Z", want: "2026-12-03T06:00:00Z"},
		{cron: "0 2 * * *", now: "2026-12-03T06:18:00Z", want: "2026-12-03T02:00:00Z"},
		{cron: "0 2 * * *", now: "2026-12-03T01:00:00Z", want: "2026-12-02T02:00:00Z"},
		{cron: "0 0 1 * *", now: "2026-12-03T01:00:00Z", want: "2026-12-01T00:00:00Z"},
	} {
		got, err := StartHolding(tc.every, tc.cron, ts(tc.now))
		if err != nil || !got.Equal(ts(tc.want)) {
			t.Errorf("StartHolding(%q, %q, %s) = %s, %v; want %s", tc.every, tc.cron, tc.now, got, err, tc.want)
		}
	}
}

// daily is a schedule of daily partitions from 2026-12-01 with versions
// 1 (from the start) and, when two, 2 from 2026-12-03.
func daily(versions int) *record.Schedule {
	sch := &record.Schedule{Name: "sales", JobName: "sales-daily", Every: "24h", Start: ts("2026-12-01T00:00:00Z"),
		Delay: "1h", PartitionTemplate: "{YYYY}-{MM}-{DD}", MaxAttempts: 3, RetryBackoff: "1m", Next: ts("2026-12-01T00:00:00Z"),
		Versions: []record.ScheduleVersion{{Version: 1, From: ts("2026-12-01T00:00:00Z"), FromPartition: "2026-12-01"}}}
	if versions == 2 {
		sch.Versions = append(sch.Versions, record.ScheduleVersion{Version: 2, From: ts("2026-12-03T00:00:00Z"), FromPartition: "2026-12-03"})
	}
	return sch
}

func TestDecide(t *testing.T) {
	run := func(p, status string, version int, next *time.Time) record.ScheduleRun {
		s := ts(p + "T00:00:00Z")
		return record.ScheduleRun{Partition: p, Start: s, End: s.Add(24 * time.Hour), Status: status, Version: version, NextAttempt: next, JobID: "job-" + p}
	}
	cases := []struct {
		name      string
		sch       *record.Schedule
		next      string
		runs      []record.ScheduleRun
		now       string
		paused    bool
		rollback  bool
		wantStart string // partition; "" nothing
		wantNew   bool
		wantVer   int
		wantWhy   string
	}{
		{name: "not due before end plus delay", sch: daily(1), next: "2026-12-01", now: "2026-12-02T00:30:00Z", wantWhy: "due at 2026-12-02T01:00:00Z"},
		{name: "due at end plus delay", sch: daily(1), next: "2026-12-01", now: "2026-12-02T01:00:00Z", wantStart: "2026-12-01", wantNew: true, wantVer: 1},
		{name: "paused", sch: daily(1), next: "2026-12-01", now: "2026-12-05T00:00:00Z", paused: true, wantWhy: "paused"},
		{name: "one at a time", sch: daily(1), next: "2026-12-02", now: "2026-12-05T00:00:00Z",
			runs: []record.ScheduleRun{run("2026-12-01", record.RunRunning, 1, nil)}, wantWhy: "2026-12-01 is running"},
		{name: "catch up in order", sch: daily(1), next: "2026-12-02", now: "2026-12-05T00:00:00Z",
			runs: []record.ScheduleRun{run("2026-12-01", record.RunPublished, 1, nil)}, wantStart: "2026-12-02", wantNew: true, wantVer: 1},
		{name: "retry waits for its backoff", sch: daily(1), next: "2026-12-02", now: "2026-12-02T01:00:30Z",
			runs: []record.ScheduleRun{run("2026-12-01", record.RunRetrying, 1, tp("2026-12-02T01:01:00Z"))}, wantWhy: "next partition 2026-12-02"},
		{name: "retry once its time came", sch: daily(1), next: "2026-12-02", now: "2026-12-02T01:01:00Z",
			runs: []record.ScheduleRun{run("2026-12-01", record.RunRetrying, 1, tp("2026-12-02T01:01:00Z"))}, wantStart: "2026-12-01", wantVer: 1},
		{name: "an earlier retry before a later new partition", sch: daily(1), next: "2026-12-03", now: "2026-12-05T00:00:00Z",
			runs:      []record.ScheduleRun{run("2026-12-01", record.RunPublished, 1, nil), run("2026-12-02", record.RunRetrying, 1, tp("2026-12-03T00:00:00Z"))},
			wantStart: "2026-12-02", wantVer: 1},
		{name: "a new partition before a later waiting one is impossible; failed ones are left", sch: daily(1), next: "2026-12-02", now: "2026-12-05T00:00:00Z",
			runs: []record.ScheduleRun{run("2026-12-01", record.RunFailed, 1, nil)}, wantStart: "2026-12-02", wantNew: true, wantVer: 1},
		{name: "switched version from its partition", sch: daily(2), next: "2026-12-03", now: "2026-12-05T00:00:00Z",
			runs:      []record.ScheduleRun{run("2026-12-01", record.RunPublished, 1, nil), run("2026-12-02", record.RunPublished, 1, nil)},
			wantStart: "2026-12-03", wantNew: true, wantVer: 2},
		{name: "old version before the switch", sch: daily(2), next: "2026-12-03", now: "2026-12-05T00:00:00Z",
			runs:      []record.ScheduleRun{run("2026-12-01", record.RunPublished, 1, nil), run("2026-12-02", record.RunRetrying, 1, tp("2026-12-03T00:00:00Z"))},
			wantStart: "2026-12-02", wantVer: 1},
		{name: "rolled back: the earlier version at the first missing output", sch: daily(2), next: "2026-12-05", now: "2026-12-06T02:00:00Z", rollback: true,
			runs:      []record.ScheduleRun{run("2026-12-03", record.RunPublished, 2, nil), run("2026-12-04", record.RunRetrying, 2, tp("2026-12-05T00:00:00Z"))},
			wantStart: "2026-12-04", wantVer: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sch := tc.sch
			sch.Next = ts(tc.next + "T00:00:00Z")
			sch.Paused = tc.paused
			if tc.rollback {
				sch.Versions[len(sch.Versions)-1].RolledBack = true
			}
			c, err := CadenceOf(sch)
			if err != nil {
				t.Fatal(err)
			}
			st := Decide(sch, c, tc.runs, ts(tc.now))
			if tc.wantStart == "" {
				if st.Start {
					t.Fatalf("started %s", st.Run.Partition)
				}
				if !strings.Contains(st.Why, tc.wantWhy) {
					t.Errorf("why %q, want it to say %q", st.Why, tc.wantWhy)
				}
				return
			}
			if !st.Start || st.Run.Partition != tc.wantStart || st.New != tc.wantNew || st.Version.Version != tc.wantVer || st.Run.Version != tc.wantVer {
				t.Errorf("step %+v (why %q), want partition %s new %v version %d", st, st.Why, tc.wantStart, tc.wantNew, tc.wantVer)
			}
		})
	}
}

func TestEndedAndBackoff(t *testing.T) {
	sch := daily(1)
	now := ts("2026-12-02T01:00:00Z")
	r := record.ScheduleRun{Partition: "2026-12-01", Status: record.RunRunning, JobID: "j1", Attempts: 1}
	if got := Ended(sch, r, record.StateDone, "", now); got.Status != record.RunPublished || got.NextAttempt != nil {
		t.Errorf("DONE: %+v", got)
	}
	got := Ended(sch, r, record.StateFailed, "reading input: boom", now)
	if got.Status != record.RunRetrying || got.NextAttempt == nil || !got.NextAttempt.Equal(now.Add(time.Minute)) ||
		!strings.Contains(got.Error, "job j1 ended FAILED: reading input: boom") {
		t.Errorf("first failure: %+v", got)
	}
	r.Attempts = 2
	if got := Ended(sch, r, record.StateCancelled, "", now); got.Status != record.RunRetrying || !got.NextAttempt.Equal(now.Add(2*time.Minute)) {
		t.Errorf("second failure: %+v", got)
	}
	r.Attempts = 3
	if got := Ended(sch, r, record.StateFailed, "", now); got.Status != record.RunFailed || got.NextAttempt != nil {
		t.Errorf("last attempt: %+v", got)
	}
	for attempts, want := range map[int]time.Duration{1: time.Minute, 2: 2 * time.Minute, 3: 4 * time.Minute, 6: 32 * time.Minute, 7: time.Hour, 20: time.Hour} {
		if got := Backoff(sch, attempts); got != want {
			t.Errorf("backoff after %d attempts %s, want %s", attempts, got, want)
		}
	}
}

// TestDueBy: the partitions a schedule's start makes due by now, counted
// up to a bound (a start decades back is refused at creation, not queued).
func TestDueBy(t *testing.T) {
	now := ts("2026-12-07T23:30:00Z")
	for _, tc := range []struct {
		name, every, cron, start string
		most, want               int
	}{
		{name: "none yet", every: "1h", start: "2026-12-07T23:00:00Z", most: 10, want: 0},
		{name: "a day of hours", every: "1h", start: "2026-12-06T23:00:00Z", most: 100, want: 24},
		{name: "stops at most", every: "1h", start: "1970-01-01T00:00:00Z", most: MaxCatchUpPartitions + 1, want: MaxCatchUpPartitions + 1},
		{name: "cron days", cron: "@daily", start: "2026-12-01T00:00:00Z", most: 100, want: 6},
		{name: "a start after now", every: "24h", start: "2027-01-01T00:00:00Z", most: 10, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, first, err := ParseCadence(tc.every, tc.cron, ts(tc.start))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.DueBy(first, now, tc.most); got != tc.want {
				t.Errorf("DueBy = %d, want %d", got, tc.want)
			}
		})
	}
}
