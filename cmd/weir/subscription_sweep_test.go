package main

import (
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/await"
)

// TestCLISubscriptionsMadeByKept drives a real `weir server` (rollback
// retention 2s) through the CLI (issue 22 item 7): `weir subscriptions
// list` and `describe` say who made each subscription and why it is kept
// — a running job's topic subscription is read by it, a cancelled job's
// is kept for the rollback retention as the next job of the name reads on
// from it, and then the server deletes it; the user's own subscription is
// made by "you" and never deleted.
func TestCLISubscriptionsMadeByKept(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server")
	}
	work := t.TempDir()
	srv := startServerArgs(t, t.TempDir(), "--rollback-retention", "2s")
	srv.mustCLI(t, work, "topics", "create", "orders")
	srv.mustCLI(t, work, "subscriptions", "create", "mine", "--topic", "orders")
	p := writeTestFile(t, work, "p.yaml", `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Orders
      config: {topic: orders, schema: {key: string, amount: int}}
    - type: Combine
      name: Totals
      input: Orders
      config:
        group_by: key
        combine: {total: {value: amount, fn: sum}}
    - type: WriteToSql
      name: Write
      input: Totals
      config: {dsn: "`+work+`/t.db", table: totals, key: [key]}
`)
	id := strings.TrimSpace(srv.mustCLI(t, work, "run", p, "--job-name", "sums").stdout)
	srv.waitJob("sums", "RUNNING", stateIs("RUNNING"))

	r := srv.mustCLI(t, work, "subscriptions", "list")
	for _, want := range []string{"MADE_BY", "KEPT", "sums--Orders", "job sums (" + id + ", step Orders)", "read by " + id, "mine"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("subscriptions list while the job runs lacks %q:\n%s", want, r.stdout)
		}
	}
	r = srv.mustCLI(t, work, "subscriptions", "describe", "mine")
	if !strings.Contains(r.stdout, "Made by") || !strings.Contains(r.stdout, "you") || strings.Contains(r.stdout, "Kept") {
		t.Errorf("describe of the user's subscription:\n%s", r.stdout)
	}

	srv.mustCLI(t, work, "jobs", "cancel", "sums")
	srv.waitJob("sums", "CANCELLED", stateIs("CANCELLED"))
	r = srv.cli(work, "subscriptions", "describe", "sums--Orders")
	deleted := r.code != ExitOK
	if !deleted && (!strings.Contains(r.stdout, "Made by") || strings.Contains(r.stdout, "Read by")) {
		t.Errorf("describe after the cancel:\n%s", r.stdout)
	}
	if !await.Until(30*time.Second, 100*time.Millisecond, func() bool {
		return srv.cli(work, "subscriptions", "describe", "sums--Orders").code != ExitOK
	}) {
		t.Fatalf("the cancelled job's subscription outlived the rollback retention:\n%s", srv.cli(work, "subscriptions", "list").stdout)
	}
	r = srv.mustCLI(t, work, "subscriptions", "list")
	if strings.Contains(r.stdout, "sums--Orders") || !strings.Contains(r.stdout, "mine") {
		t.Errorf("subscriptions list after the sweep:\n%s", r.stdout)
	}
}
