package service

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/io/pubsub"
)

// pubsubUpdateYAML sums the amounts of a topic per key in the global window
// (the sums fire when the job is drained) into an upserting SQLite table.
// %s slots: an optional stateless step and the combine's input.
const pubsubUpdateYAML = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Events
      config:
        topic: update-events
        schema: {key: string, amount: int}
%s    - type: Combine
      name: Sums
      input: %s
      config:
        group_by: [key]
        combine:
          total: {value: amount, fn: sum}
          n: {value: amount, fn: count}
    - type: WriteToSql
      name: WriteTotals
      input: Sums
      config: {dsn: %s, table: totals, key: [key]}
`

// TestUpdatePubSubUnderLoad: a job reading a topic while messages are being
// published is updated twice in flight (the new execution starts before the
// handover checkpoint is written, and resumes the same subscription). After
// the drain, every key's total and count equal what was published: no
// message was lost to the swap's hand-over of the subscription, none was
// counted twice.
func TestUpdatePubSubUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b := startBroker(t, dir, "update-events")
	s := openServiceWithBroker(t, filepath.Join(dir, "data"), b)
	db := filepath.Join(dir, "totals.sqlite")
	pipeline := func(filter bool) string {
		if filter {
			return fmt.Sprintf(pubsubUpdateYAML, "    - type: Filter\n      name: KeepAll\n      input: Events\n      config: {keep: \"amount >= 0\"}\n", "KeepAll", db)
		}
		return fmt.Sprintf(pubsubUpdateYAML, "", "Events", db)
	}
	j := submit(t, s, "sums", pipeline(false), dir)

	const n, keys = 6000, 7
	want := map[string][2]int64{}
	published := make(chan error, 1)
	go func() {
		// A load generator, not a synchronisation: 100 messages per tick.
		tick := time.NewTicker(10 * time.Millisecond) // about 10,000 messages/s
		defer tick.Stop()
		for i := range n {
			key := fmt.Sprintf("k%d", i%keys)
			msg := fmt.Sprintf(`{"key": %q, "amount": %d}`, key, i)
			if _, err := b.Publish(ctx, "update-events", []byte(msg), nil, ""); err != nil {
				published <- err
				return
			}
			if i%100 == 99 {
				<-tick.C
			}
		}
		published <- nil
	}()
	for i := range n {
		w := want[fmt.Sprintf("k%d", i%keys)]
		want[fmt.Sprintf("k%d", i%keys)] = [2]int64{w[0] + int64(i), w[1] + 1}
	}
	waitElements(t, s, j.ID, "Events", 1000)
	for round, filter := range []bool{true, false} {
		res, err := s.Update(ctx, UpdateRequest{SubmitRequest: SubmitRequest{Name: "sums", Pipeline: pipeline(filter), BaseDir: dir}})
		if err != nil {
			t.Fatalf("update %d: %v", round+1, err)
		}
		j = res.Job
		waitElements(t, s, j.ID, "Events", 500)
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	// Wait until the subscription is read to the end, then drain. The
	// backlog is the broker's: look again at every change of the service
	// (each checkpoint acknowledges, each sample follows one).
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		changed := s.core.Changes.Next()
		info, err := b.Subscription(ctx, pubsub.SubscriptionName("sums", "Events"))
		if err == nil && info.Backlog == 0 {
			break
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("the subscription still has a backlog: %+v %v", info, err)
		}
	}
	if _, err := s.Drain(ctx, "sums"); err != nil {
		t.Fatal(err)
	}
	// DRAINED is recorded with the final checkpoint; the sink commits it
	// right after (pending_commit until then).
	fin := waitFor(t, s, j.ID, "DRAINED and committed", drainedAndCommitted)
	if fin.State != record.StateDrained || fin.Generation != 3 {
		t.Fatalf("after the drain: %s, generation %d", fin.State, fin.Generation)
	}
	var rows []string
	for k, w := range want {
		rows = append(rows, fmt.Sprintf("%s %d %d", k, w[0], w[1]))
	}
	got := totalsTable(t, db)
	sort.Strings(rows)
	if strings.Join(got, "\n") != strings.Join(rows, "\n") {
		t.Errorf("the table holds (key total count):\n%s\nwhat was published:\n%s", strings.Join(got, "\n"), strings.Join(rows, "\n"))
	}
}
