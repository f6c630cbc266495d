package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/weir-dev/weir/client"
)

// Publish batching: a request carries at most publishBatchMessages
// messages and about publishBatchBytes of payload, well under
// client.MaxRequestBytes; maxLineBytes bounds one input line.
const (
	publishBatchMessages = 1000
	publishBatchBytes    = 2 << 20
	maxLineBytes         = 4 << 20
)

// pubsubClientError maps an API error of the topic and subscription routes
// to the CLI's exit codes, as clientError does for every route (bad names
// and settings are invalid, so usage errors).
func pubsubClientError(ctx context.Context, c *client.Client, err error) error {
	return clientError(ctx, c, err)
}

// groupCommand returns a command group that prints its help, or a usage
// error for an unknown subcommand.
func groupCommand(use, short, long string, subs ...*cobra.Command) *cobra.Command {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.Name()
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unknown %s command %q (want %s)", use, args[0], strings.Join(names, ", "))
			}
			return cmd.Help()
		},
	}
	cmd.AddCommand(subs...)
	return cmd
}

func newTopicsCommand(e *env) *cobra.Command {
	return groupCommand("topics", "Create, list, delete and publish to the topics of a weir server's Pub/Sub",
		`Topics manages the topics of a running weir server's Pub/Sub (--server,
$WEIR_SERVER, default http://127.0.0.1:7070). A topic is a durable log: it keeps
messages for its retention (default 7 days), acknowledged or not, so that
subscriptions can later seek back. Pipelines read topics with ReadFromPubSub
and write them with WriteToPubSub.

Names are 1 to 200 characters from [A-Za-z0-9_.~+%-], starting with a letter or
digit. The dead-letter topic of job J is weir.deadletter.J.

Exit codes: 0 success, 1 the topic was not found or exists already, 2 usage
(also an invalid name or setting), 5 no weir server answers.`,
		newTopicsCreateCommand(e), newTopicsListCommand(e), newTopicsDescribeCommand(e), newTopicsDeleteCommand(e), newTopicsPublishCommand(e))
}

func newTopicsCreateCommand(e *env) *cobra.Command {
	var retention time.Duration
	return showCommand(e, showSpec[*client.Topic]{
		use:   "create NAME",
		short: "Create a topic",
		args:  exactArgs("NAME"),
		check: func(*cobra.Command, []string) error {
			if retention <= 0 {
				return usageErrorf("--retention %s: want a positive duration such as 168h", retention)
			}
			return nil
		},
		fetch: func(ctx context.Context, c *client.Client, args []string) (*client.Topic, error) {
			return c.CreateTopic(ctx, client.CreateTopicRequest{Name: args[0], Retention: retention.String()})
		},
		clientErr: pubsubClientError,
		text: func(w io.Writer, t *client.Topic) error {
			_, err := fmt.Fprintf(w, "Created topic %s (retention %s).\n", t.Name, t.Retention)
			return outputErr(err)
		},
		flags: func(fs *pflag.FlagSet) {
			fs.DurationVar(&retention, "retention", 7*24*time.Hour, "how long the topic keeps messages, acknowledged or not")
		},
	})
}

func newTopicsListCommand(e *env) *cobra.Command {
	return showCommand(e, showSpec[[]client.Topic]{
		use:   "list",
		short: "List topics (NAME MESSAGES BYTES SUBSCRIPTIONS RETENTION), by name",
		args:  exactArgs(),
		fetch: func(ctx context.Context, c *client.Client, _ []string) ([]client.Topic, error) {
			return c.ListTopics(ctx)
		},
		clientErr: pubsubClientError,
		text: func(w io.Writer, topics []client.Topic) error {
			return writeTable(w, "NAME\tMESSAGES\tBYTES\tSUBSCRIPTIONS\tRETENTION", topics, func(t client.Topic) string {
				return fmt.Sprintf("%s\t%d\t%d\t%d\t%s", t.Name, t.Messages, t.Bytes, t.Subscriptions, t.Retention)
			})
		},
	})
}

func newTopicsDescribeCommand(e *env) *cobra.Command {
	return showCommand(e, showSpec[*client.Topic]{
		use:   "describe NAME",
		short: "Describe a topic: messages, sequences, retention, subscriptions",
		args:  exactArgs("NAME"),
		fetch: func(ctx context.Context, c *client.Client, args []string) (*client.Topic, error) {
			return c.GetTopic(ctx, args[0])
		},
		clientErr: pubsubClientError,
		text: func(w io.Writer, t *client.Topic) error {
			return writeFields(w, func(row func(k, v string)) {
				row("Name", t.Name)
				row("Subject", t.Subject)
				row("Messages", fmt.Sprintf("%d (%d bytes), sequences %d..%d", t.Messages, t.Bytes, t.FirstSeq, t.LastSeq))
				row("Retention", t.Retention)
				row("Duplicate window", t.DuplicateWindow)
				row("Subscriptions", strconv.Itoa(t.Subscriptions))
				row("Create time", formatTime(t.CreateTime))
			})
		},
	})
}

func newTopicsDeleteCommand(e *env) *cobra.Command {
	return pubsubDeleteCommand(e, "Delete a topic with its messages and its subscriptions (refused while a job uses it, unless --force)",
		"topic", true, (*client.Client).DeleteTopic)
}

// pubsubDeleteCommand builds `weir ... delete NAME`, which deletes the Pub/Sub
// resource NAME (a noun such as "topic") with del and prints "Deleted noun
// NAME."; withForce adds --force, which makes del pass client.Force().
func pubsubDeleteCommand(e *env, short, noun string, withForce bool,
	del func(c *client.Client, ctx context.Context, name string, opts ...client.DeleteOption) error) *cobra.Command {
	var server serverFlag
	var force bool
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: short,
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient(server)
			if err != nil {
				return err
			}
			var opts []client.DeleteOption
			if force {
				opts = append(opts, client.Force())
			}
			if err := del(c, cmd.Context(), args[0], opts...); err != nil {
				return pubsubClientError(cmd.Context(), c, err)
			}
			_, err = fmt.Fprintf(e.stdout, "Deleted %s %s.\n", noun, args[0])
			return outputErr(err)
		},
	}
	if withForce {
		cmd.Flags().BoolVar(&force, "force", false, "delete even when a running job uses it (the job then fails to read or write it)")
	}
	addServerFlag(cmd, &server)
	return cmd
}

// publishFlags are the flags of `weir topics publish`.
type publishFlags struct {
	format, file, idField string
	// message, when set (--message), is the one message's data, any text.
	message     *string
	orderingKey string
	server      serverFlag
	attributes  []string
}

// publishSummary is what `weir topics publish --format json` prints.
type publishSummary struct {
	Topic      string `json:"topic"`
	Published  int    `json:"published"`
	Duplicates int    `json:"duplicates"`
	// IDConflicts counts the duplicates whose content differed from the
	// stored message of their ID: dropped all the same.
	IDConflicts int `json:"id_conflicts"`
}

func newTopicsPublishCommand(e *env) *cobra.Command {
	var f publishFlags
	cmd := &cobra.Command{
		Use:   "publish TOPIC [--message TEXT]",
		Short: "Publish one message (--message), or JSON lines from a file or stdin, one message per line",
		Long: `Publish reads JSON lines from --file (or stdin, or --file -) and publishes
each non-empty line as one message, in order, as it is. Every line must be
valid JSON; the first that is not stops the command, naming its line number,
after the lines before it were published. --message TEXT publishes the one
message TEXT instead (any text, as gcloud's --message).

--attribute k=v (repeatable, or comma-separated as gcloud's
--attribute=k1=v1,k2=v2) sets attributes on every message; --ordering-key K
gives every message the ordering key K (Pub/Sub clients that enable message
ordering receive a key's messages in order). --id-field F
takes each message's ID from the top-level field F of its JSON object (a string
or a number): a message whose ID the topic stored within its duplicate window
(10 minutes) is not stored again, so publishing a file twice is harmless.

It prints how many messages were stored and how many were duplicates, and
warns when a duplicate's content differed from the stored message of its ID
(an ID reused for another message: the topic dropped it all the same).`,
		Args: exactArgs("TOPIC"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPublish(cmd.Context(), e, cmd.InOrStdin(), args[0], f)
		},
	}
	addFormatFlag(cmd, &f.format)
	addServerFlag(cmd, &f.server)
	fl := cmd.Flags()
	fl.StringVarP(&f.file, "file", "f", "", "JSON lines file to publish (default stdin)")
	fl.StringArrayVar(&f.attributes, "attribute", nil, "k=v attribute set on every message (repeatable, or k1=v1,k2=v2)")
	fl.Func("message", "publish this one message (any text) instead of reading JSON lines", func(v string) error {
		f.message = &v
		return nil
	})
	fl.StringVar(&f.orderingKey, "ordering-key", "", "ordering key of every message, as Pub/Sub's")
	fl.StringVar(&f.idField, "id-field", "", "top-level JSON field holding each message's ID, for de-duplication")
	return cmd
}

// orderingKeyAttribute is the attribute that carries a message's ordering
// key through weir's Pub/Sub (as its gRPC and REST surfaces store it).
const orderingKeyAttribute = "goog_ordering_key"

// parseAttributes reads --attribute flags: k=v, or gcloud's list
// k1=v1,k2=v2 (a flag is split at commas only when every part is k=v, so
// that a value may hold a comma).
func parseAttributes(flags []string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(flags))
	for _, a := range flags {
		parts := strings.Split(a, ",")
		for _, p := range parts {
			if !strings.Contains(p, "=") {
				parts = []string{a}
				break
			}
		}
		for _, p := range parts {
			k, v, ok := strings.Cut(p, "=")
			if !ok || k == "" {
				return nil, usageErrorf("--attribute %q: want name=value", a)
			}
			out[k] = v
		}
	}
	return out, nil
}

func runPublish(ctx context.Context, e *env, stdin io.Reader, topic string, f publishFlags) error {
	if err := checkFormat(f.format); err != nil {
		return err
	}
	attrs, err := parseAttributes(f.attributes)
	if err != nil {
		return err
	}
	if f.orderingKey != "" {
		if attrs == nil {
			attrs = map[string]string{}
		}
		attrs[orderingKeyAttribute] = f.orderingKey
	}
	if f.message != nil {
		if f.file != "" || f.idField != "" {
			return usageErrorf("--message publishes one message: it takes neither --file nor --id-field")
		}
		return publishOne(ctx, e, topic, *f.message, attrs, f)
	}
	in, name := stdin, "stdin"
	if f.file != "" && f.file != "-" {
		fh, err := os.Open(f.file)
		if err != nil {
			return withCode(ExitFailure, fmt.Errorf("opening the messages to publish: %w", err))
		}
		defer fh.Close()
		in, name = fh, f.file
	}
	c, err := newClient(f.server)
	if err != nil {
		return err
	}
	sum := publishSummary{Topic: topic}
	var batch []client.PublishMessage
	size := 0
	send := func() error {
		if len(batch) == 0 {
			return nil
		}
		res, err := c.Publish(ctx, topic, batch)
		if err != nil {
			err = pubsubClientError(ctx, c, err)
			if sum.Published+sum.Duplicates > 0 {
				return withCode(exitCode(ctx, err), fmt.Errorf("%w (%s before)", err, publishedBefore(sum)))
			}
			return err
		}
		sum.Published += res.Published
		sum.Duplicates += res.Duplicates
		sum.IDConflicts += res.IDConflicts
		batch, size = batch[:0], 0
		return nil
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		m, err := lineMessage(text, attrs, f.idField)
		if err != nil {
			_ = send() // publish what came before, as documented
			return withCode(ExitFailure, fmt.Errorf("%s:%d: %w; %s before it", name, line, err, publishedBefore(sum)))
		}
		batch = append(batch, m)
		size += len(text)
		if len(batch) >= publishBatchMessages || size >= publishBatchBytes {
			if err := send(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("a line is longer than %d bytes", maxLineBytes)
		}
		_ = send()
		return withCode(ExitFailure, fmt.Errorf("reading %s: %w; %s before", name, err, publishedBefore(sum)))
	}
	if err := send(); err != nil {
		return err
	}
	if sum.IDConflicts > 0 {
		fmt.Fprintf(e.stderr, "weir: warning: %s of the duplicates reused an ID the topic stores with other content: the topic kept its first message and dropped these (use a new ID for new content)\n", plural(sum.IDConflicts, "message"))
	}
	if f.format == formatJSON {
		return writeJSON(e.stdout, sum)
	}
	_, err = fmt.Fprintf(e.stdout, "Published %s to topic %s (%s).\n", plural(sum.Published, "message"), topic, plural(sum.Duplicates, "duplicate"))
	return outputErr(err)
}

// publishOne publishes the one message of --message: text as its data.
func publishOne(ctx context.Context, e *env, topic, text string, attrs map[string]string, f publishFlags) error {
	data, err := json.Marshal(text) // a JSON string: published byte for byte
	if err != nil {
		return fmt.Errorf("encoding the message: %w", err)
	}
	c, err := newClient(f.server)
	if err != nil {
		return err
	}
	res, err := c.Publish(ctx, topic, []client.PublishMessage{{Data: data, Attributes: attrs}})
	if err != nil {
		return pubsubClientError(ctx, c, err)
	}
	sum := publishSummary{Topic: topic, Published: res.Published, Duplicates: res.Duplicates, IDConflicts: res.IDConflicts}
	if f.format == formatJSON {
		return writeJSON(e.stdout, sum)
	}
	seq := ""
	if len(res.Results) == 1 {
		seq = fmt.Sprintf(" at sequence %d", res.Results[0].Sequence)
	}
	_, err = fmt.Fprintf(e.stdout, "Published 1 message to topic %s%s.\n", topic, seq)
	return outputErr(err)
}

// publishedBefore says how many messages a failed publish got through.
func publishedBefore(sum publishSummary) string {
	if n := sum.Published + sum.Duplicates; n != 1 {
		return fmt.Sprintf("%d messages were published", n)
	}
	return "1 message was published"
}

// lineMessage makes the message of one JSON line: the line as its data,
// attrs, and the ID from idField when set.
func lineMessage(line []byte, attrs map[string]string, idField string) (client.PublishMessage, error) {
	if !json.Valid(line) {
		return client.PublishMessage{}, errors.New("the line is not valid JSON")
	}
	data, err := json.Marshal(string(line)) // a JSON string: published byte for byte
	if err != nil {
		return client.PublishMessage{}, fmt.Errorf("encoding the line: %w", err)
	}
	m := client.PublishMessage{Data: data, Attributes: attrs}
	if idField == "" {
		return m, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		return client.PublishMessage{}, fmt.Errorf("--id-field %s needs a JSON object on every line", idField)
	}
	raw, ok := obj[idField]
	if !ok {
		return client.PublishMessage{}, fmt.Errorf("--id-field %s: the object has no field %q", idField, idField)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil && s != "" {
		m.ID = s
		return m, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err == nil {
		m.ID = n.String()
		return m, nil
	}
	return client.PublishMessage{}, fmt.Errorf("--id-field %s: field %q is %s, want a non-empty string or a number", idField, idField, raw)
}

func newSubscriptionsCommand(e *env) *cobra.Command {
	return groupCommand("subscriptions", "Create, list, delete and pull from the subscriptions of a weir server's Pub/Sub",
		`Subscriptions manages the subscriptions of a running weir server's Pub/Sub
(--server, $WEIR_SERVER, default http://127.0.0.1:7070). A subscription is a
durable cursor on one topic with acknowledgements: a message delivered and not
acknowledged within the ack wait is delivered again. Acknowledgements are
cumulative (acknowledging a message acknowledges every earlier one), so a
subscription has one reader at a time: do not pull with acknowledgement from a
subscription a running job reads. A new subscription gets the messages
published after its creation, or every retained one with --from-beginning.
`+"`weir subscriptions snapshots`"+` records a subscription's acknowledgement
state; `+"`weir subscriptions seek`"+` sets it to a snapshot's or to a time.

Exit codes: 0 success, 1 the subscription or topic was not found or the name
is taken, 2 usage (also an invalid name or setting), 5 no weir server answers.`,
		newSubscriptionsCreateCommand(e), newSubscriptionsListCommand(e), newSubscriptionsDescribeCommand(e),
		newSubscriptionsDeleteCommand(e), newSubscriptionsPullCommand(e),
		newSubscriptionsSeekCommand(e), newSubscriptionSnapshotsCommand(e))
}

func newSubscriptionsCreateCommand(e *env) *cobra.Command {
	var topic string
	var ackWait time.Duration
	var ackDeadline int
	var fromBeginning bool
	return showCommand(e, showSpec[*client.Subscription]{
		use:   "create NAME --topic TOPIC",
		short: "Create a subscription on a topic",
		args:  exactArgs("NAME"),
		check: func(cmd *cobra.Command, _ []string) error {
			if topic == "" {
				return usageErrorf("%s needs --topic TOPIC", cmd.CommandPath())
			}
			if cmd.Flags().Changed("ack-deadline") {
				if cmd.Flags().Changed("ack-wait") {
					return usageErrorf("--ack-deadline and --ack-wait both set the ack wait: give one")
				}
				if ackDeadline < 10 || ackDeadline > 600 {
					return usageErrorf("--ack-deadline %d: want 10 to 600 seconds, as Pub/Sub", ackDeadline)
				}
				ackWait = time.Duration(ackDeadline) * time.Second
			}
			if ackWait <= 0 {
				return usageErrorf("--ack-wait %s: want a positive duration such as 60s", ackWait)
			}
			return nil
		},
		fetch: func(ctx context.Context, c *client.Client, args []string) (*client.Subscription, error) {
			return c.CreateSubscription(ctx, client.CreateSubscriptionRequest{Name: args[0], Topic: topic, AckWait: ackWait.String(), FromBeginning: fromBeginning})
		},
		clientErr: pubsubClientError,
		text: func(w io.Writer, s *client.Subscription) error {
			from := "new messages only"
			if fromBeginning {
				from = fmt.Sprintf("from the beginning: %d messages pending", s.Backlog)
			}
			_, err := fmt.Fprintf(w, "Created subscription %s on topic %s (ack wait %s, %s).\n", s.Name, s.Topic, s.AckWait, from)
			return outputErr(err)
		},
		flags: func(fl *pflag.FlagSet) {
			fl.StringVar(&topic, "topic", "", "topic the subscription reads (required)")
			fl.DurationVar(&ackWait, "ack-wait", 10*time.Second, "how long a delivered message may stay unacknowledged before it is delivered again (Pub/Sub's default, 10s)")
			fl.IntVar(&ackDeadline, "ack-deadline", 10, "the ack wait in seconds, as gcloud's --ack-deadline (10 to 600)")
			fl.BoolVar(&fromBeginning, "from-beginning", false, "deliver every message the topic retains, not only those published from now on")
		},
	})
}

func newSubscriptionsListCommand(e *env) *cobra.Command {
	var topic string
	return showCommand(e, showSpec[[]client.Subscription]{
		use:   "list [--topic TOPIC]",
		short: "List subscriptions (NAME TOPIC BACKLOG ACK_PENDING ACK_WAIT MADE_BY KEPT), by name",
		args:  exactArgs(),
		fetch: func(ctx context.Context, c *client.Client, _ []string) ([]client.Subscription, error) {
			return c.ListSubscriptions(ctx, topic)
		},
		clientErr: pubsubClientError,
		text: func(w io.Writer, subs []client.Subscription) error {
			return writeTable(w, "NAME\tTOPIC\tBACKLOG\tACK_PENDING\tACK_WAIT\tMADE_BY\tKEPT", subs, func(s client.Subscription) string {
				return fmt.Sprintf("%s\t%s\t%d\t%d\t%s\t%s\t%s", s.Name, s.Topic, s.Backlog, s.NumAckPending, s.AckWait, madeBy(s), kept(s))
			})
		},
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&topic, "topic", "", "list only the subscriptions of this topic")
		},
	})
}

func newSubscriptionsDescribeCommand(e *env) *cobra.Command {
	return showCommand(e, showSpec[*client.Subscription]{
		use:   "describe NAME",
		short: "Describe a subscription: topic, backlog, acknowledgement floor",
		args:  exactArgs("NAME"),
		fetch: func(ctx context.Context, c *client.Client, args []string) (*client.Subscription, error) {
			return c.GetSubscription(ctx, args[0])
		},
		clientErr: pubsubClientError,
		text: func(w io.Writer, s *client.Subscription) error {
			return writeFields(w, func(row func(k, v string)) {
				row("Name", s.Name)
				row("Topic", s.Topic)
				row("Backlog", fmt.Sprintf("%d (%d not delivered, %d awaiting acknowledgement)", s.Backlog, s.NumPending, s.NumAckPending))
				row("Acknowledged up to", fmt.Sprintf("sequence %d", s.AckFloor))
				row("Delivered up to", fmt.Sprintf("sequence %d", s.Delivered))
				row("Ack wait", s.AckWait)
				row("Create time", formatTime(s.CreateTime))
				row("Made by", madeBy(*s))
				if len(s.ReadBy) > 0 {
					var rs []string
					for _, r := range s.ReadBy {
						rs = append(rs, fmt.Sprintf("%s (%s, %s)", r.JobID, r.JobName, r.State))
					}
					row("Read by", strings.Join(rs, ", "))
				}
				if s.MadeBy != nil {
					row("Kept", kept(*s))
				}
			})
		},
	})
}

func newSubscriptionsDeleteCommand(e *env) *cobra.Command {
	return pubsubDeleteCommand(e, "Delete a subscription (its topic keeps its messages; refused while a job reads it, unless --force)",
		"subscription", true, (*client.Client).DeleteSubscription)
}

func newSubscriptionsPullCommand(e *env) *cobra.Command {
	var format string
	var server serverFlag
	var maxN int
	var autoAck, noAck, forcePull bool
	cmd := &cobra.Command{
		Use:   "pull NAME [--limit N] [--auto-ack [--force]]",
		Short: "Print the messages available now, without acknowledging them unless --auto-ack (for people, not pipelines)",
		Long: `Pull prints up to --limit (or --max) messages available now in the
subscription, without waiting for more. As gcloud's pull, it leaves them
unacknowledged: they are delivered again after the subscription's ack wait,
so looking does not consume. --auto-ack acknowledges them. Acknowledgement is
cumulative, so --auto-ack on a subscription a running job reads is refused
(SUBSCRIPTION_IN_USE) unless --force.

The text output is one block per message: its sequence, publish time, ID and
attributes, then its data. --format json prints
[{data, data_base64?, attributes, id, sequence, publish_time, num_delivered}];
yaml and the projections table(...), value(...) and csv(...) print the same
fields.`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := parseFormat(format)
			if err != nil {
				return err
			}
			if maxN < 1 || maxN > client.MaxPull {
				name := "--limit"
				if cmd.Flags().Changed("max") {
					name = "--max"
				}
				return usageErrorf("%s %d: want 1 to %d", name, maxN, client.MaxPull)
			}
			if autoAck && noAck {
				return usageErrorf("--auto-ack and --no-ack contradict each other (pull leaves messages unacknowledged unless --auto-ack)")
			}
			if forcePull && !autoAck {
				return usageErrorf("--force only applies with --auto-ack (a pull without acknowledgement needs no force)")
			}
			c, err := newClient(server)
			if err != nil {
				return err
			}
			msgs, err := c.Pull(cmd.Context(), args[0], client.PullRequest{Max: maxN, Ack: autoAck, Force: forcePull})
			if err != nil {
				return pubsubClientError(cmd.Context(), c, err)
			}
			return f.write(e.stdout, msgs, func(w io.Writer) error { return printPulled(w, args[0], msgs, autoAck) })
		},
	}
	cmd.Flags().StringVar(&format, "format", formatText, formatHelp)
	addServerFlag(cmd, &server)
	cmd.Flags().IntVar(&maxN, "limit", 10, "most messages to print")
	cmd.Flags().IntVar(&maxN, "max", 10, "most messages to print (the same as --limit)")
	cmd.Flags().BoolVar(&autoAck, "auto-ack", false, "acknowledge the messages printed (gcloud's --auto-ack): they are not delivered again")
	cmd.Flags().BoolVar(&noAck, "no-ack", false, "leave the messages unacknowledged (the default)")
	_ = cmd.Flags().MarkHidden("no-ack")
	cmd.Flags().BoolVar(&forcePull, "force", false, "with --auto-ack: acknowledge even when a running job reads the subscription (it then never sees those messages)")
	return cmd
}

// printPulled prints pulled messages for people.
func printPulled(w io.Writer, sub string, msgs []client.PulledMessage, acked bool) error {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "sequence %d  published %s", m.Sequence, formatTime(m.PublishTime))
		if m.ID != "" {
			fmt.Fprintf(&b, "  id %s", m.ID)
		}
		if m.NumDelivered > 1 {
			fmt.Fprintf(&b, "  delivery %d", m.NumDelivered)
		}
		if len(m.Attributes) > 0 {
			keys := make([]string, 0, len(m.Attributes))
			for k := range m.Attributes {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			b.WriteString("  attributes")
			for _, k := range keys {
				fmt.Fprintf(&b, " %s=%s", k, m.Attributes[k])
			}
		}
		b.WriteString("\n  ")
		if m.DataBase64 != "" {
			b.WriteString("(binary, base64) " + m.DataBase64)
		} else {
			b.WriteString(m.Data)
		}
		b.WriteString("\n")
	}
	what := "left unacknowledged"
	if acked {
		what = "acknowledged"
	}
	if len(msgs) == 0 {
		fmt.Fprintf(&b, "No messages available in subscription %s.\n", sub)
	} else {
		fmt.Fprintf(&b, "%s from subscription %s, %s.\n", plural(len(msgs), "message"), sub, what)
	}
	_, err := io.WriteString(w, b.String())
	return outputErr(err)
}

// plural returns "1 message", "2 messages".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// outputErr reports a failed write to stdout.
func outputErr(err error) error { return cli.OutputErr(err) }

// madeBy says who made subscription s: the job (and step) the server made
// it for, or "you" for a subscription the server did not make.
func madeBy(s client.Subscription) string {
	if s.MadeBy == nil {
		return "you"
	}
	return fmt.Sprintf("job %s (%s, step %s)", s.MadeBy.JobName, s.MadeBy.JobID, s.MadeBy.Step)
}

// kept says why the server keeps a subscription it made: "-" for the
// user's own, which it never deletes.
func kept(s client.Subscription) string {
	switch {
	case s.MadeBy == nil:
		return "-"
	case s.Kept == "":
		return "no longer: deleted by the next sweep"
	case s.KeepUntil != nil:
		return fmt.Sprintf("%s, until %s", s.Kept, s.KeepUntil.UTC().Format(time.RFC3339))
	}
	return s.Kept
}
