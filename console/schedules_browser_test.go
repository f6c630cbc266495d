package console_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/server"
)

// TestConsoleSchedules: the schedules page lists a real schedule with its
// published partitions; the schedule's page draws its partition grid —
// published cells linking to their jobs, a waiting cell for a partition
// whose files are missing, the next partition — and its versions.
func TestConsoleSchedules(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t)
	root := t.TempDir()
	p, c := startWeir(t, server.Config{FileRoots: []string{root}})
	bg := context.Background()
	today := time.Now().UTC().Truncate(24 * time.Hour)
	d1, d2, d3 := today.AddDate(0, 0, -3).Format("2006-01-02"), today.AddDate(0, 0, -2).Format("2006-01-02"), today.AddDate(0, 0, -1).Format("2006-01-02")
	for _, d := range []string{d1, d2} {
		dir := filepath.Join(root, "in", d)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "a.jsonl"), []byte(`{"region": "NORTH", "amount": 250}`+"\n"+`{"region": "WEST", "amount": 100}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(root, "out.db")
	pipeline := `pipeline:
  transforms:
    - type: ReadFromJson
      name: Transactions
      config: {path: unused.jsonl, schema: {region: string, amount: int}}
    - type: Combine
      name: Totals
      input: Transactions
      config:
        group_by: region
        combine:
          total: {value: amount, fn: sum}
    - type: WriteToSql
      name: Write
      input: Totals
      config: {dsn: "` + db + `", table: totals, key: [region]}
`
	start := today.AddDate(0, 0, -3)
	if _, err := c.CreateSchedule(bg, client.CreateScheduleRequest{Name: "sales", JobName: "sales-daily", Pipeline: pipeline, PipelineFile: "sales.yaml",
		BaseDir: root, Every: "24h", Start: &start, Files: []string{filepath.Join(root, "in", "{partition}", "*.jsonl")}}); err != nil {
		t.Fatal(err)
	}
	var s *client.Schedule
	if !await.Until(60*time.Second, 100*time.Millisecond, func() bool {
		got, err := c.GetSchedule(bg, "sales")
		if err != nil {
			return false
		}
		s = got
		return len(s.Runs) == 3 && s.Runs[0].Status == "published" && s.Runs[1].Status == "published" && s.Runs[2].Status == "waiting"
	}) {
		t.Fatalf("the schedule did not publish d1, d2 and wait for d3: %+v", s)
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(p.Address()+"/schedules?refresh=300"), present(`tr[data-schedule="sales"]`)); err != nil {
		t.Fatalf("the schedules page does not list the schedule: %v", err)
	}
	var row []string
	if err := evaluate(ctx, `[...document.querySelector('tr[data-schedule="sales"]').cells].map((c) => c.textContent)`, &row); err != nil {
		t.Fatal(err)
	}
	if len(row) != 11 || row[1] != "sales-daily" || row[2] != "every 24h0m0s" || row[3] != "1" || row[6] != "2" || row[8] != "1" || row[10] != "active" {
		t.Errorf("the schedule's row: %q", row)
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(p.Address()+"/schedules/sales?refresh=300"), present(`#partition-grid [data-partition="`+d1+`"]`)); err != nil {
		t.Fatalf("the schedule's page has no partition grid: %v", err)
	}
	evalUntil(t, ctx, "the grid shows each partition's status", fmt.Sprintf(`(() => {
		const st = (p) => { const e = document.querySelector('#partition-grid [data-partition="' + p + '"]'); return e && e.dataset.status; };
		return st(%q) === 'published' && st(%q) === 'published' && st(%q) === 'waiting' && st(%q) === 'next';
	})()`, d1, d2, d3, today.Format("2006-01-02")))
	evalUntil(t, ctx, "a published cell links to its job", fmt.Sprintf(`document.querySelector('#partition-grid [data-partition=%q]').getAttribute('href') === '/jobs/%s'`, d1, s.Runs[0].JobID))
	evalUntil(t, ctx, "the versions table lists version 1", `!!document.querySelector('#schedule-versions tr[data-version="1"]')`)
	evalUntil(t, ctx, "the waiting run says what is missing", fmt.Sprintf(`document.querySelector('#schedule-runs tr[data-partition=%q]').textContent.includes('matches no file')`, d3))
	screenshot(t, ctx, "console-schedule")
}
