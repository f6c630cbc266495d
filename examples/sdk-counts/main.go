// Command sdk-counts is a Go program run as a durable, updatable weir job
// (package weirx): it counts the elements of an unbounded generated stream
// per key, firing every 100 elements of a key (accumulating panes in the
// global window), and upserts the running counts into the SQLite table
// "counts" (key, n) in the data directory.
//
// Element i has key "k<i mod 7>", so the exact count of every key is known
// from the source's position: after a drain, the counts sum to the number
// of elements read.
//
// The graph depends on the build's variant, set with
// go build -ldflags "-X main.variant=v2":
//
//	v1  Events -> Window -> CountPerKey -> ToRow -> WriteCounts
//	v2  adds a stateless step, Valid, after Events (an update v1 -> v2 passes)
//	v3  keys the count by an integer instead of a string (an update to v3 is
//	    refused: CountPerKey's stored key changes)
//
// Run it with: sdk-counts --job-name counts [--data-dir DIR] [--update].
//
// Like any user program, it may import weir (the SDK), weirx, window, row,
// io/sqlsink and the standard library.
package main

import (
	"fmt"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/io/sqlsink"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/weirx"
	"github.com/weir-dev/weir/window"
)

// variant selects the graph (see the package documentation); set at build time.
var variant = "v1"

// Keys is the number of distinct keys; Rate the elements per second.
const (
	Keys = 7
	Rate = 2000
)

func main() { weirx.Main(build) }

func build(p *weir.Pipeline) error {
	switch variant {
	case "v1", "v2", "v3":
	default:
		return fmt.Errorf("unknown variant %q (want v1, v2 or v3)", variant)
	}
	s := p.Root()
	schema := row.MustSchema(row.Field{Name: "key", Type: row.Of(row.KindString)}, row.Field{Name: "n", Type: row.Of(row.KindInt)})
	windowing := weir.Windowing{Fn: window.GlobalFn(), Trigger: window.Repeatedly(window.AfterCount(100)), Accumulation: window.Accumulating}
	var rows weir.PCollection[*row.Row]
	if variant == "v3" {
		events := weir.Generate(s, "Events", weir.GenerateConfig{Rate: Rate}, func(i int64) weir.KV[int64, int64] {
			return weir.KV[int64, int64]{Key: i % Keys, Value: 1}
		})
		counts := weir.CombinePerKey(s, "CountPerKey", weir.WindowInto(s, "Window", events, windowing), weir.Sum[int64]())
		rows = weir.Map(s, "ToRow", counts, func(kv weir.KV[int64, int64]) *row.Row {
			return &row.Row{Schema: schema, Values: []any{fmt.Sprintf("k%d", kv.Key), kv.Value}}
		})
	} else {
		events := weir.Generate(s, "Events", weir.GenerateConfig{Rate: Rate}, func(i int64) weir.KV[string, int64] {
			return weir.KV[string, int64]{Key: fmt.Sprintf("k%d", i%Keys), Value: 1}
		})
		if variant == "v2" {
			events = weir.Filter(s, "Valid", events, func(kv weir.KV[string, int64]) bool { return kv.Value > 0 })
		}
		counts := weir.CombinePerKey(s, "CountPerKey", weir.WindowInto(s, "Window", events, windowing), weir.Sum[int64]())
		rows = weir.Map(s, "ToRow", counts, func(kv weir.KV[string, int64]) *row.Row {
			return &row.Row{Schema: schema, Values: []any{kv.Key, kv.Value}}
		})
	}
	return weirx.WriteToSql(s, "WriteCounts", rows, schema, sqlsink.Config{Table: "counts", Key: []string{"key"}})
}
