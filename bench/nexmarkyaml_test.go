package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/nexmark"
	"github.com/weir-dev/weir/nexmark/nexmarkmodel"
	"github.com/weir-dev/weir/yamlpipe"
)

// yamlQueryCase says how one YAML query's JSON lines are rendered as its
// model renders the results, and which model that is.
type yamlQueryCase struct {
	render func(m map[string]any) (string, error)
	model  func([]nexmark.Event, []mtime.Time, nexmark.Config) []string
	// all, when set instead of render, renders the results as a whole
	// (q12: its panes added up per bidder).
	all func(rows []map[string]any) ([]string, error)
}

// yamlQueryCases covers every query in nexmarkYAMLSteps.
var yamlQueryCases = map[string]yamlQueryCase{
	"q0": {render: func(m map[string]any) (string, error) {
		for field, kind := range map[string]string{"newPerson": "person", "newAuction": "auction", "bid": "bid"} {
			if m[field] == nil {
				continue
			}
			sub, _ := m[field].(map[string]any)
			var err error
			var v any
			switch kind {
			case "person":
				v, err = decodeAs[nexmark.Person](sub)
			case "auction":
				v, err = decodeAs[nexmark.Auction](sub)
			default:
				v, err = decodeAs[nexmark.Bid](sub)
			}
			return fmt.Sprintf("%s %+v", kind, v), err
		}
		return "", fmt.Errorf("an event with no person, auction or bid: %v", m)
	}, model: nexmarkmodel.Q0},
	"q1": {render: plainAs[nexmark.Bid], model: nexmarkmodel.Q1},
	"q2": {render: plainAs[nexmark.AuctionPrice], model: nexmarkmodel.Q2},
	"q3": {render: plainAs[nexmark.NameCityStateID], model: nexmarkmodel.Q3},
	"q5": {render: windowedAs[nexmark.AuctionCount], model: nexmarkmodel.Q5},
	"q7": {render: windowedAs[nexmark.Bid], model: nexmarkmodel.Q7},
	"q8": {render: windowedAs[nexmark.IDNameReserve], model: nexmarkmodel.Q8},
	"q4": {render: windowedAs[nexmark.CategoryPrice], model: nexmarkmodel.Q4},
	"q6": {render: plainAs[nexmark.SellerPrice], model: nexmarkmodel.Q6},
	"q9": {render: func(m map[string]any) (string, error) {
		// The auction's fields and the winning bid's (bidder, price,
		// bidDateTime, bidExtra), as the Go query's AuctionBid.
		a, err := decodeAs[nexmark.Auction](m)
		if err != nil {
			return "", err
		}
		b, err := decodeAs[nexmark.Bid](map[string]any{"auction": m["id"], "bidder": m["bidder"], "price": m["price"], "dateTime": m["bidDateTime"], "extra": m["bidExtra"]})
		return fmt.Sprintf("%+v", nexmark.AuctionBid{Auction: a, Bid: b}), err
	}, model: func(evs []nexmark.Event, _ []mtime.Time, _ nexmark.Config) []string {
		wins, _ := nexmarkmodel.WinningBids(evs)
		out := make([]string, len(wins))
		for i, w := range wins {
			out[i] = fmt.Sprintf("%+v", w)
		}
		return out
	}},
	"q11": {render: sessionAs[nexmark.BidsPerSession], model: nexmarkmodel.Q11},
	"q12": {model: nexmarkmodel.Q12, all: func(rows []map[string]any) ([]string, error) {
		panes := make([]nexmark.BidsPerWindow, len(rows))
		for i, m := range rows {
			var err error
			if panes[i], err = decodeAs[nexmark.BidsPerWindow](m); err != nil {
				return nil, err
			}
		}
		return nexmarkmodel.Q12Totals(panes), nil
	}},
}

// decodeAs reads a JSON object of a YAML row as T: its timestamps (RFC
// 3339 strings) become milliseconds, as mtime.Time holds them.
func decodeAs[T any](m map[string]any) (T, error) {
	var v T
	c := make(map[string]any, len(m))
	for k, x := range m {
		if s, ok := x.(string); ok && (k == "dateTime" || k == "expires") {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return v, fmt.Errorf("%s: %w", k, err)
			}
			x = t.UnixMilli()
		}
		c[k] = x
	}
	b, err := json.Marshal(c)
	if err != nil {
		return v, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	err = d.Decode(&v)
	return v, err
}

func plainAs[T any](m map[string]any) (string, error) {
	v, err := decodeAs[T](m)
	return fmt.Sprintf("%+v", v), err
}

// windowMillis reads a result's window_start or window_end.
func windowMillis(m map[string]any, field string) (int64, error) {
	s, ok := m[field].(string)
	if !ok {
		return 0, fmt.Errorf("a windowed result without %s: %v", field, m)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t.UnixMilli(), err
}

func windowedAs[T any](m map[string]any) (string, error) {
	start, err := windowMillis(m, "window_start")
	if err != nil {
		return "", err
	}
	v, err := plainAs[T](m)
	return nexmarkmodel.WindowKey(mtime.Time(start)) + v, err
}

func sessionAs[T any](m map[string]any) (string, error) {
	start, err := windowMillis(m, "window_start")
	if err != nil {
		return "", err
	}
	end, err := windowMillis(m, "window_end")
	if err != nil {
		return "", err
	}
	v, err := plainAs[T](m)
	return fmt.Sprintf("[%d,%d)", start, end) + v, err
}

// TestNexmarkYAMLQueriesMatchModels runs every Nexmark query written in
// YAML (the pipelines `weir bench nexmark --yaml` runs) on 100,000 events
// for three configurations and compares its results, with their windows,
// with the reference models the Go queries are checked against.
func TestNexmarkYAMLQueriesMatchModels(t *testing.T) {
	for _, q := range NexmarkYAMLQueries() {
		qc, ok := yamlQueryCases[q]
		if !ok {
			t.Errorf("the YAML query %s has no case in this test", q)
			continue
		}
		for _, r := range nexmarkmodel.Runs() {
			cfg := r.Config
			t.Run(q+"/"+r.Name(), func(t *testing.T) {
				evs, ts, err := nexmarkmodel.Events(cfg)
				if err != nil {
					t.Fatal(err)
				}
				want := qc.model(evs, ts, cfg)
				rows := runYAMLQuery(t, q, cfg, r.Workers)
				var got []string
				if qc.all != nil {
					got, err = qc.all(rows)
				} else {
					for _, m := range rows {
						s, err := qc.render(m)
						if err != nil {
							t.Fatalf("%v: %v", m, err)
						}
						got = append(got, s)
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				nexmarkmodel.Compare(t, got, want)
			})
		}
	}
}

// runYAMLQuery runs query q in YAML over cfg's events with a JSON sink
// after its Out step and returns its results' JSON objects.
func runYAMLQuery(t *testing.T, q string, cfg nexmark.Config, workers int) []map[string]any {
	t.Helper()
	source := fmt.Sprintf("{numEvents: %d, seed: %d, firstEventRate: %d, outOfOrderGroupSize: %d}",
		cfg.NumEvents, cfg.Seed, cfg.FirstEventRate, cfg.OutOfOrderGroupSize)
	src, err := NexmarkYAMLPipeline(q, source, time.Duration(cfg.WindowSizeSec)*time.Second, time.Duration(cfg.WindowPeriodSec)*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out.jsonl")
	src += fmt.Sprintf("    - type: WriteToJson\n      input: Out\n      config: {path: %q}\n", out)
	p, err := yamlpipe.Load("nexmark-"+q+".yaml", []byte(src), yamlpipe.Options{})
	if err != nil {
		t.Fatalf("loading:\n%s\n%v", src, err)
	}
	if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: workers}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		got = append(got, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}
