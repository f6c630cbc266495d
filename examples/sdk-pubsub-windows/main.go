// Command sdk-pubsub-windows is a Go program run as a durable weir job
// (package weirx) that counts page views per page in one-minute event-time
// windows: it reads JSON clicks {"page": "...", "ts": "RFC 3339 time"} from
// the topic "clicks" (event time from ts), and publishes one message per
// page and window, {"page", "window_start", "views"}, to the topic
// "page-views" when the watermark passes the window's end. Clicks up to 30
// seconds late still count (a late firing updates the window's count).
//
// Run it with: sdk-pubsub-windows --job-name page-views [--data-dir DIR],
// then publish clicks and read the counts with the CLI against the program's
// address (printed on its first line):
//
//	weir subscriptions create views --topic page-views --server http://ADDR
//	weir topics publish clicks --server http://ADDR --message "{\"page\": \"/home\", \"ts\": \"$(date -u +%FT%TZ)\"}"
//	weir subscriptions pull views --auto-ack --server http://ADDR   # once the minute is over
//
// A caught-up subscription moves the watermark to the present after 5 idle
// seconds (pubsub.WatermarkPolicy's IdleTimeout): clicks from the past are
// late then, and go to the dead-letter topic; set the IdleTimeout to -1 to
// backfill history.
//
// Like any user program, it may import weir (the SDK), weirx, io/pubsub,
// mtime, row, window and the standard library.
package main

import (
	"context"
	"errors"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/weirx"
	"github.com/weir-dev/weir/window"
)

var (
	clickSchema = row.MustSchema(row.Field{Name: "page", Type: row.Of(row.KindString)}, row.Field{Name: "ts", Type: row.Of(row.KindTimestamp)})
	viewsSchema = row.MustSchema(row.Field{Name: "page", Type: row.Of(row.KindString)},
		row.Field{Name: "window_start", Type: row.Of(row.KindTimestamp)}, row.Field{Name: "views", Type: row.Of(row.KindInt)})
)

func main() { weirx.Main(build) }

func build(p *weir.Pipeline) error {
	s := p.Root()
	if b, ok := p.Job().Broker.(*pubsub.Broker); ok && b != nil {
		// The input topic must exist before the job subscribes to it; the
		// output topic too, for a subscription to it before the first count.
		for _, topic := range []string{"clicks", "page-views"} {
			if _, err := b.CreateTopic(context.Background(), topic, pubsub.TopicConfig{}); err != nil && !errors.Is(err, pubsub.ErrTopicExists) {
				return err
			}
		}
	}
	clicks, err := weirx.ReadFromPubSub(s, "Clicks", pubsub.SourceConfig{Topic: "clicks", Schema: clickSchema, TimestampField: "ts"})
	if err != nil {
		return err
	}
	byPage := weir.Map(s, "ByPage", clicks, func(r *row.Row) weir.KV[string, int64] {
		page, _ := r.Values[0].(string)
		return weir.KV[string, int64]{Key: page, Value: 1}
	})
	minutes := weir.WindowInto(s, "PerMinute", byPage, weir.Windowing{
		Fn:              window.FixedFn(mtime.Minute),
		Trigger:         window.AfterWatermark(nil, nil),
		AllowedLateness: 30 * mtime.Second,
		Accumulation:    window.Accumulating,
	})
	counts := weir.CombinePerKey(s, "Views", minutes, weir.Count[int64]())
	rows := weir.ParDo(s, "ToRow", counts, func(c *weir.Context, kv weir.KV[string, int64], emit func(*row.Row)) error {
		emit(&row.Row{Schema: viewsSchema, Values: []any{kv.Key, c.Window().Start, kv.Value}})
		return nil
	}, weir.WithCoder(viewsSchema.Coder()))
	return weirx.WriteToPubSub(s, "Publish", rows, viewsSchema, pubsub.SinkConfig{Topic: "page-views"})
}
