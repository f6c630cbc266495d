package console_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/internal/natscluster"
	"github.com/weir-dev/weir/server"
)

// TestConsoleCluster: a follower's cluster page lists both members of a
// real two-member cluster — the leader holding every key group of the
// job it runs (linked), the follower none, with how far its replica lags —
// under the cluster's name and the member that answered; a server outside
// a cluster says it runs alone.
func TestConsoleCluster(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t)
	nc := natscluster.Start(t, 1, 0)
	cfg := server.Config{Cluster: "console", NATSURL: nc.URLs(), ClusterLeaseTTL: 2 * time.Second}
	leader, lc := startWeir(t, cfg)
	follower, fc := startWeir(t, cfg)
	bg := context.Background()
	// The first member leads once it holds the lease.
	var job *client.SubmitResponse
	var err error
	if !await.Until(30*time.Second, 100*time.Millisecond, func() bool {
		job, err = lc.Submit(bg, client.SubmitRequest{Name: "events", Pipeline: streamingYAML, BaseDir: t.TempDir()})
		return err == nil
	}) {
		t.Fatalf("submitting to the first member: %v", err)
	}
	waitJob(t, lc, job.ID, "the job runs on the leader", running)
	var members *client.ClusterMembers
	if !await.Until(30*time.Second, 50*time.Millisecond, func() bool {
		m, err := fc.ClusterMembers(bg)
		members = m
		return err == nil && len(m.Members) == 2 && len(m.Members[0].Jobs)+len(m.Members[1].Jobs) == 1
	}) {
		t.Fatalf("the follower does not list two members, the leader running the job: %+v", members)
	}
	var leaderID, followerID string
	for _, m := range members.Members {
		if m.Leader {
			leaderID = m.ID
		} else {
			followerID = m.ID
		}
	}
	if leaderID == "" || followerID == "" || members.Answered != followerID {
		t.Fatalf("members %+v: want a leader, and the follower answering", members)
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(follower.Address()+"/cluster?refresh=300"), present(`#members tr[data-member="`+followerID+`"]`)); err != nil {
		t.Fatalf("the follower's cluster page does not list the follower: %v", err)
	}
	evalUntil(t, ctx, "the page names the cluster and the member that answered", fmt.Sprintf(
		`document.querySelector('#cluster-name').textContent.includes('Cluster console, answered by member %s (2 members)')`, followerID))
	evalUntil(t, ctx, "the leader's row holds the job's key groups, linked", fmt.Sprintf(`(() => {
		const r = document.querySelector('#members tr[data-member=%q]');
		const a = r && r.cells[3].querySelector('a');
		return r.dataset.role === 'leader' && r.cells[3].textContent === 'all of 1 job(s): events' && a && a.getAttribute('href') === '/jobs/events' && r.cells[5].textContent === '–';
	})()`, leaderID))
	evalUntil(t, ctx, "the follower's row holds none, with its lag", fmt.Sprintf(`(() => {
		const r = document.querySelector('#members tr[data-member=%q]');
		return r.dataset.role === 'follower' && r.cells[2].textContent === 'follower' && r.cells[3].textContent === 'none (replica)' && /^[0-9,]+$/.test(r.cells[5].textContent);
	})()`, followerID))
	screenshot(t, ctx, "console-cluster")
	// The leader's own page answers the same.
	if err := chromedp.Do(ctx, chromedp.Navigate(leader.Address()+"/cluster?refresh=300"), present(`#members tr[data-member="`+leaderID+`"]`)); err != nil {
		t.Fatalf("the leader's cluster page: %v", err)
	}

	single, _ := startWeir(t, server.Config{})
	if err := chromedp.Do(ctx, chromedp.Navigate(single.Address()+"/cluster"), present(`#cluster-message p`)); err != nil {
		t.Fatalf("a single server's cluster page: %v", err)
	}
	evalUntil(t, ctx, "a single server says it runs alone", `document.querySelector('#cluster-message').textContent.includes('This server runs alone') && document.querySelectorAll('#members tbody tr').length === 0`)
}
