package schedules

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/weir-dev/weir/manifest"
	"github.com/weir-dev/weir/service/record"
)

// Cadence cuts time into a schedule's partitions: fixed periods aligned to
// the schedule's start (every), or the stretches between one time of a
// cron expression and the next, in UTC.
type Cadence struct {
	every time.Duration
	cron  cron.Schedule
	// anchor is the start of the first partition (every: partitions are
	// anchor + k·every).
	anchor time.Time
}

// minEvery is the shortest partition: a partition run is a whole job.
const minEvery = time.Minute

// cronParser reads standard five-field expressions and descriptors
// (@daily, @hourly; @every is refused: use --every).
func cronParser() cron.Parser {
	return cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
}

// ParseCadence reads a schedule's every or cron (exactly one set) with
// start, the start of its first partition. For a cron expression the
// first partition starts at the expression's first time at or after
// start; the returned time is that start.
func ParseCadence(every, cronExpr string, start time.Time) (Cadence, time.Time, error) {
	start = start.UTC()
	switch {
	case every != "" && cronExpr != "":
		return Cadence{}, time.Time{}, errors.New("give either --every or --cron, not both")
	case every != "":
		d, err := time.ParseDuration(every)
		if err != nil {
			return Cadence{}, time.Time{}, fmt.Errorf("--every %q is not a duration (as 1h, 24h, 15m): %w", every, err)
		}
		if d < minEvery {
			return Cadence{}, time.Time{}, fmt.Errorf("--every %s is shorter than a partition can be (%s): a partition run is a whole job", d, minEvery)
		}
		if d%time.Second != 0 {
			return Cadence{}, time.Time{}, fmt.Errorf("--every %s is not a whole number of seconds", d)
		}
		return Cadence{every: d, anchor: start}, start, nil
	case cronExpr != "":
		if strings.HasPrefix(strings.TrimSpace(cronExpr), "@every") {
			return Cadence{}, time.Time{}, fmt.Errorf("--cron %q: use --every for a fixed period", cronExpr)
		}
		c, err := cronParser().Parse(cronExpr)
		if err != nil {
			return Cadence{}, time.Time{}, fmt.Errorf("--cron %q is not a cron expression (five fields: minute hour day-of-month month day-of-week, in UTC; or @daily, @hourly, @weekly, @monthly): %w", cronExpr, err)
		}
		first := c.Next(start.Add(-time.Nanosecond))
		if first.IsZero() {
			return Cadence{}, time.Time{}, fmt.Errorf("--cron %q never fires after %s", cronExpr, start.Format(time.RFC3339))
		}
		cd := Cadence{cron: c, anchor: first.UTC()}
		if second := c.Next(first); second.IsZero() || second.Sub(first) < minEvery {
			return Cadence{}, time.Time{}, fmt.Errorf("--cron %q fires more often than a partition can be long (%s)", cronExpr, minEvery)
		}
		return cd, first.UTC(), nil
	}
	return Cadence{}, time.Time{}, errors.New("a schedule needs --every DURATION or --cron EXPR")
}

// StartHolding returns the start of the partition that holds t when no
// start is given: for every, the period holding t counted in whole
// periods from the Unix epoch; for cron, the expression's latest time at
// or before t.
func StartHolding(every, cronExpr string, t time.Time) (time.Time, error) {
	t = t.UTC()
	epoch := time.Unix(0, 0).UTC()
	if every != "" {
		c, _, err := ParseCadence(every, "", epoch)
		if err != nil {
			return time.Time{}, err
		}
		return c.Align(t), nil
	}
	for _, back := range []time.Duration{24 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour, 5 * 366 * 24 * time.Hour} {
		c, first, err := ParseCadence("", cronExpr, t.Add(-back))
		if err != nil {
			return time.Time{}, err
		}
		if !first.After(t) {
			return c.Align(t), nil
		}
	}
	return time.Time{}, fmt.Errorf("--cron %q has no time in the five years before %s: give --start", cronExpr, t.Format(time.RFC3339))
}

// MaxCatchUpPartitions bounds the partitions a new schedule's --start may
// make due at once: a start decades back (a typo of the year) would
// otherwise queue a partition a second, for good, each waiting for its
// files.
const MaxCatchUpPartitions = 100_000

// DueBy counts the partitions from the one starting at start that end by
// now, stopping at most.
func (c Cadence) DueBy(start, now time.Time, most int) int {
	n := 0
	for p := start; n < most; n++ {
		end := c.End(p)
		if end.IsZero() || end.After(now) {
			break
		}
		p = end
	}
	return n
}

// CadenceOf returns sch's cadence.
func CadenceOf(sch *record.Schedule) (Cadence, error) {
	c, _, err := ParseCadence(sch.Every, sch.Cron, sch.Start)
	return c, err
}

// End returns the end of the partition that starts at start (the start of
// the next one).
func (c Cadence) End(start time.Time) time.Time {
	if c.every > 0 {
		return start.Add(c.every).UTC()
	}
	return c.cron.Next(start).UTC()
}

// Align returns the start of the partition that holds t (t before the
// first partition: the first partition's start). For a cron cadence it
// walks from the first partition.
func (c Cadence) Align(t time.Time) time.Time {
	if !t.After(c.anchor) {
		return c.anchor
	}
	if c.every > 0 {
		k := t.Sub(c.anchor) / c.every
		return c.anchor.Add(k * c.every).UTC()
	}
	s := c.anchor
	for i := 0; i < maxWalk; i++ {
		e := c.cron.Next(s)
		if e.IsZero() || e.After(t) {
			return s
		}
		s = e.UTC()
	}
	return s
}

// maxWalk bounds the partitions a walk over a cron cadence visits.
const maxWalk = 1_000_000

// Template fields of a partition's start, and the partition ID in file
// templates.
var templateFields = []struct {
	token  string
	layout string
}{
	{"{YYYY}", "2006"}, {"{MM}", "01"}, {"{DD}", "02"}, {"{HH}", "15"}, {"{mm}", "04"}, {"{ss}", "05"},
}

// DefaultTemplate returns the partition template for c: a date when
// partitions are whole days from midnight, an hour when they are whole
// hours, else minutes (or seconds) — the coarsest that tells c's
// partitions apart.
func DefaultTemplate(c Cadence) string {
	d := c.every
	if d == 0 {
		d = c.End(c.anchor).Sub(c.anchor) // a cron cadence: its first partition
	}
	a := c.anchor
	candidates := []struct {
		template string
		fits     bool
	}{
		{"{YYYY}-{MM}-{DD}", d%(24*time.Hour) == 0 && a.Hour() == 0 && a.Minute() == 0 && a.Second() == 0},
		{"{YYYY}-{MM}-{DD}T{HH}", d%time.Hour == 0 && a.Minute() == 0 && a.Second() == 0 || c.every == 0 && a.Minute() == 0 && a.Second() == 0},
		{"{YYYY}-{MM}-{DD}T{HH}{mm}", d%time.Minute == 0 && a.Second() == 0},
	}
	for _, cand := range candidates {
		if cand.fits && CheckTemplate(cand.template, c) == nil {
			return cand.template
		}
	}
	return "{YYYY}-{MM}-{DD}T{HH}{mm}{ss}"
}

// Expand fills template with the UTC fields of start and, when partition
// is not empty, {partition}.
func Expand(template string, start time.Time, partition string) string {
	start = start.UTC()
	pairs := make([]string, 0, 2*len(templateFields)+2)
	for _, f := range templateFields {
		pairs = append(pairs, f.token, start.Format(f.layout))
	}
	if partition != "" {
		pairs = append(pairs, "{partition}", partition)
	}
	return strings.NewReplacer(pairs...).Replace(template)
}

// PartitionID is the ID of the partition starting at start.
func PartitionID(template string, start time.Time) string { return Expand(template, start, "") }

// CheckTemplate checks that template makes valid partition IDs that tell
// c's partitions apart (the first few, and across a year).
func CheckTemplate(template string, c Cadence) error {
	if strings.Contains(template, "{partition}") {
		return fmt.Errorf("--partition-template %q: {partition} is what the template makes; use {YYYY} {MM} {DD} {HH} {mm} {ss}", template)
	}
	seen := map[string]time.Time{}
	s := c.anchor
	for i := 0; i < 400; i++ {
		id := PartitionID(template, s)
		if err := manifest.ValidateName("partition", id); err != nil {
			return fmt.Errorf("--partition-template %q: %w", template, err)
		}
		if prev, ok := seen[id]; ok {
			return fmt.Errorf("--partition-template %q gives the partitions starting at %s and %s the same ID %q: add finer fields", template, prev.Format(time.RFC3339), s.Format(time.RFC3339), id)
		}
		seen[id] = s
		s = c.End(s)
		if s.IsZero() {
			break
		}
	}
	return nil
}

// FindPartition returns the start of the partition whose ID is id,
// walking from the first partition up to limit (a partition ID is made
// from its start, not parsed back).
func FindPartition(template string, c Cadence, id string, limit time.Time) (time.Time, bool) {
	s := c.anchor
	for i := 0; i < maxWalk && !s.After(limit); i++ {
		if PartitionID(template, s) == id {
			return s, true
		}
		s = c.End(s)
		if s.IsZero() {
			break
		}
	}
	return time.Time{}, false
}
