package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/weir-dev/weir/client"
)

// weir subscriptions snapshots ... and weir subscriptions seek: Pub/Sub's
// subscription snapshots and seek, through the server's API.

func newSubscriptionSnapshotsCommand(e *env) *cobra.Command {
	return groupCommand("snapshots", "Create, list, describe and delete subscription snapshots",
		`Snapshots manages subscription snapshots (Pub/Sub's): a snapshot records a
subscription's acknowledgement state at its creation — every message up to its
acknowledgement floor counts as acknowledged and, for a subscription that
acknowledges each message on its own (the Pub/Sub gRPC API's), so does every
message acknowledged above the floor by then (at most 10,000 runs of them,
else SNAPSHOT_TOO_LARGE); every other message counts as not — so that the
subscription, or another of the same topic, can later be sought back to it
(weir subscriptions seek SUB --snapshot NAME).

A snapshot lives 7 days less the age of the subscription's oldest
unacknowledged message, and never past that message's expiry from the topic
(its retention); a snapshot that would live under an hour is refused
(SNAPSHOT_EXPIRES_TOO_SOON). Expired snapshots are deleted automatically;
deleting a topic deletes its subscriptions' snapshots.

Exit codes: 0 success, 1 not found, name taken, expires too soon or too large, 2 usage,
5 no weir server answers.`,
		newSubSnapshotsCreateCommand(e), newSubSnapshotsListCommand(e), newSubSnapshotsDescribeCommand(e), newSubSnapshotsDeleteCommand(e))
}

// printSubSnapshot prints a subscription snapshot for people (weir
// subscriptions snapshots describe).
func printSubSnapshot(w io.Writer, s *client.SubscriptionSnapshot) error {
	return writeFields(w, func(row func(k, v string)) {
		row("Name", s.Name)
		row("Topic", s.Topic)
		row("Subscription", s.Subscription)
		row("Acknowledged up to", fmt.Sprintf("sequence %d", s.AckFloor))
		if len(s.Acked) > 0 {
			row("Also acknowledged", formatRuns(s.Acked))
		}
		row("Create time", formatTime(s.CreateTime))
		row("Expire time", formatTime(s.ExpireTime))
		if len(s.Labels) > 0 {
			keys := make([]string, 0, len(s.Labels))
			for k := range s.Labels {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for i, k := range keys {
				keys[i] = k + "=" + s.Labels[k]
			}
			row("Labels", strings.Join(keys, ", "))
		}
	})
}

// formatRuns shows runs of sequences as "5, 8, 10-12", the first 20 and
// a count of the rest.
func formatRuns(runs []client.SeqRange) string {
	const shown = 20
	var parts []string
	for i, r := range runs {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more runs", len(runs)-shown))
			break
		}
		if r.First == r.Last {
			parts = append(parts, fmt.Sprintf("%d", r.First))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", r.First, r.Last))
		}
	}
	return "sequences " + strings.Join(parts, ", ")
}

func newSubSnapshotsCreateCommand(e *env) *cobra.Command {
	var sub string
	return showCommand(e, showSpec[*client.SubscriptionSnapshot]{
		use:   "create NAME --subscription SUB",
		short: "Snapshot a subscription's acknowledgement state",
		args:  exactArgs("NAME"),
		check: func(cmd *cobra.Command, _ []string) error {
			if sub == "" {
				return usageErrorf("%s needs --subscription SUB: the subscription to snapshot", cmd.CommandPath())
			}
			return nil
		},
		fetch: func(ctx context.Context, c *client.Client, args []string) (*client.SubscriptionSnapshot, error) {
			return c.CreateSubscriptionSnapshot(ctx, client.CreateSubscriptionSnapshotRequest{Name: args[0], Subscription: sub})
		},
		clientErr: pubsubClientError,
		text: func(w io.Writer, s *client.SubscriptionSnapshot) error {
			_, err := fmt.Fprintf(w, "Created snapshot %s of subscription %s (topic %s): acknowledged up to sequence %d; expires %s.\n",
				s.Name, s.Subscription, s.Topic, s.AckFloor, formatTime(s.ExpireTime))
			return outputErr(err)
		},
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&sub, "subscription", "", "subscription to snapshot (required)")
		},
	})
}

func newSubSnapshotsListCommand(e *env) *cobra.Command {
	var topic string
	return showCommand(e, showSpec[[]client.SubscriptionSnapshot]{
		use:   "list [--topic TOPIC]",
		short: "List subscription snapshots (NAME TOPIC SUBSCRIPTION ACK_FLOOR EXPIRE_TIME), by name",
		args:  exactArgs(),
		fetch: func(ctx context.Context, c *client.Client, _ []string) ([]client.SubscriptionSnapshot, error) {
			return c.ListSubscriptionSnapshots(ctx, topic)
		},
		clientErr: pubsubClientError,
		text: func(w io.Writer, list []client.SubscriptionSnapshot) error {
			return writeTable(w, "NAME\tTOPIC\tSUBSCRIPTION\tACK_FLOOR\tEXPIRE_TIME", list, func(s client.SubscriptionSnapshot) string {
				return fmt.Sprintf("%s\t%s\t%s\t%d\t%s", s.Name, s.Topic, s.Subscription, s.AckFloor, formatTime(s.ExpireTime))
			})
		},
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&topic, "topic", "", "list only the snapshots of this topic's subscriptions")
		},
	})
}

func newSubSnapshotsDescribeCommand(e *env) *cobra.Command {
	return showCommand(e, showSpec[*client.SubscriptionSnapshot]{
		use:   "describe NAME",
		short: "Describe a subscription snapshot",
		args:  exactArgs("NAME"),
		fetch: func(ctx context.Context, c *client.Client, args []string) (*client.SubscriptionSnapshot, error) {
			return c.GetSubscriptionSnapshot(ctx, args[0])
		},
		clientErr: pubsubClientError,
		text:      printSubSnapshot,
	})
}

func newSubSnapshotsDeleteCommand(e *env) *cobra.Command {
	return pubsubDeleteCommand(e, "Delete a subscription snapshot", "subscription snapshot", false,
		func(c *client.Client, ctx context.Context, name string, _ ...client.DeleteOption) error {
			return c.DeleteSubscriptionSnapshot(ctx, name)
		})
}

func newSubscriptionsSeekCommand(e *env) *cobra.Command {
	var snapshot, at string
	var force bool
	return showCommand(e, showSpec[*client.SeekResult]{
		use:   "seek SUB --snapshot NAME | --time RFC3339 [--force]",
		short: "Set a subscription's acknowledgement state to a snapshot's or to a time",
		long: `Seek sets the acknowledgement state of subscription SUB (Pub/Sub's seek):

  --snapshot NAME  to a snapshot's, which must be of a subscription of the same
                   topic (SNAPSHOT_TOPIC_MISMATCH otherwise);
  --time T         to a time (RFC 3339, e.g. 2026-12-01T10:00:00Z): messages
                   published before T count as acknowledged, those at or after
                   T as unacknowledged (a time before the oldest retained
                   message makes everything retained unacknowledged).

The subscription then delivers again from its first unacknowledged message.
Seeking a subscription that a RUNNING or DRAINING job reads is refused
(SUBSCRIPTION_IN_USE, naming the job): it breaks the job's watermark and
exactly-once. Drain or cancel the job first; --force seeks anyway.

The reprocessing recipe: weir snapshots create --job-id J --snapshot-sources
(or weir subscriptions snapshots create S --subscription SUB), drain or cancel
J, weir subscriptions seek SUB --snapshot S, deploy the job again.

Exit codes: 0 success, 1 not found, in use, 2 usage (also a topic mismatch),
5 no weir server answers.`,
		args: exactArgs("SUB"),
		check: func(cmd *cobra.Command, _ []string) error {
			if (snapshot == "") == (at == "") {
				return usageErrorf("%s needs exactly one of --snapshot NAME and --time RFC3339", cmd.CommandPath())
			}
			if at != "" {
				if _, err := time.Parse(time.RFC3339Nano, at); err != nil {
					return usageErrorf("--time %q is not an RFC 3339 time (like 2026-12-01T10:00:00Z)", at)
				}
			}
			return nil
		},
		fetch: func(ctx context.Context, c *client.Client, args []string) (*client.SeekResult, error) {
			return c.Seek(ctx, args[0], client.SeekRequest{Snapshot: snapshot, Time: at, Force: force})
		},
		clientErr: pubsubClientError,
		text: func(w io.Writer, res *client.SeekResult) error {
			to := "snapshot " + snapshot
			if at != "" {
				to = at
			}
			_, err := fmt.Fprintf(w, "Sought subscription %s (topic %s) to %s: acknowledged up to sequence %d, %s unacknowledged.\n",
				res.Subscription, res.Topic, to, res.AckFloor, plural(int(res.Backlog), "message"))
			return outputErr(err)
		},
		flags: func(fl *pflag.FlagSet) {
			fl.StringVar(&snapshot, "snapshot", "", "seek to this subscription snapshot's state")
			fl.StringVar(&at, "time", "", "seek to this time (RFC 3339): earlier messages count as acknowledged")
			fl.BoolVar(&force, "force", false, "seek even when a running or draining job reads the subscription")
		},
	})
}
