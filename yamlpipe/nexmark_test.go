package yamlpipe

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/weir-dev/weir/nexmark"
)

// nexmarkQueriesYAML is Nexmark's queries 0 to 2 in YAML over one source.
const nexmarkQueriesYAML = `pipeline:
  transforms:
    - type: Nexmark
      name: Events
      config: {numEvents: 100000, seed: %d, firstEventRate: 10000}
    # q0: passthrough.
    - type: MapToFields
      name: Q0
      input: Events
      config:
        fields: {eventType: eventType, newPerson: newPerson, newAuction: newAuction, bid: bid}
    - type: WriteToJson
      input: Q0
      config: {path: q0.jsonl}
    # q1: currency conversion.
    - type: Filter
      name: Bids
      input: Events
      config: {keep: eventType == 'BID'}
    - type: MapToFields
      name: Q1
      input: Bids
      config:
        fields:
          auction: bid.auction
          bidder: bid.bidder
          price: bid.price * 89 / 100
          dateTime: bid.dateTime
          extra: bid.extra
    - type: WriteToJson
      input: Q1
      config: {path: q1.jsonl}
    # q2: selection.
    - type: Filter
      name: Q2Select
      input: Events
      config: {keep: eventType == 'BID' && bid.auction %% 123 == 0}
    - type: MapToFields
      name: Q2
      input: Q2Select
      config:
        fields: {auction: bid.auction, price: bid.price}
    - type: WriteToJson
      input: Q2
      config: {path: q2.jsonl}
`

// TestNexmarkQueriesInYAML runs q0-q2 written in YAML and compares their
// output with models computed from the generator directly.
func TestNexmarkQueriesInYAML(t *testing.T) {
	for _, tc := range []struct {
		seed    int64
		workers int
	}{{0, 1}, {7, 2}} {
		t.Run(fmt.Sprintf("seed%d/workers%d", tc.seed, tc.workers), func(t *testing.T) {
			dir := t.TempDir()
			if err := runSrc(t, dir, fmt.Sprintf(nexmarkQueriesYAML, tc.seed), tc.workers); err != nil {
				t.Fatal(err)
			}
			g, err := nexmark.NewGenerator(nexmark.Config{Seed: tc.seed}, nexmark.BaseTime)
			if err != nil {
				t.Fatal(err)
			}
			var wantQ0, wantQ1, wantQ2 []string
			for _, e := range g.Generate(0, 100_000) {
				switch {
				case e.Person != nil:
					wantQ0 = append(wantQ0, fmt.Sprintf("person %d %s %s", e.Person.ID, e.Person.Name, e.Person.Extra))
				case e.Auction != nil:
					wantQ0 = append(wantQ0, fmt.Sprintf("auction %d %d %d %s", e.Auction.ID, e.Auction.Seller, e.Auction.Reserve, e.Auction.Extra))
				default:
					b := e.Bid
					wantQ0 = append(wantQ0, fmt.Sprintf("bid %d %d %d %s", b.Auction, b.Bidder, b.Price, b.Extra))
					wantQ1 = append(wantQ1, fmt.Sprintf("%d %d %d %s", b.Auction, b.Bidder, b.Price*89/100, b.Extra))
					if b.Auction%123 == 0 {
						wantQ2 = append(wantQ2, fmt.Sprintf("%d %d", b.Auction, b.Price))
					}
				}
			}
			gotQ0 := nexmarkLines(t, filepath.Join(dir, "q0.jsonl"), func(m map[string]any) string {
				switch {
				case m["newPerson"] != nil:
					p := m["newPerson"].(map[string]any)
					return fmt.Sprintf("person %v %v %v", p["id"], p["name"], p["extra"])
				case m["newAuction"] != nil:
					a := m["newAuction"].(map[string]any)
					return fmt.Sprintf("auction %v %v %v %v", a["id"], a["seller"], a["reserve"], a["extra"])
				}
				b := m["bid"].(map[string]any)
				return fmt.Sprintf("bid %v %v %v %v", b["auction"], b["bidder"], b["price"], b["extra"])
			})
			gotQ1 := nexmarkLines(t, filepath.Join(dir, "q1.jsonl"), func(m map[string]any) string {
				return fmt.Sprintf("%v %v %v %v", m["auction"], m["bidder"], m["price"], m["extra"])
			})
			gotQ2 := nexmarkLines(t, filepath.Join(dir, "q2.jsonl"), func(m map[string]any) string {
				return fmt.Sprintf("%v %v", m["auction"], m["price"])
			})
			for _, q := range []struct {
				name      string
				got, want []string
			}{{"q0", gotQ0, wantQ0}, {"q1", gotQ1, wantQ1}, {"q2", gotQ2, wantQ2}} {
				sort.Strings(q.got)
				sort.Strings(q.want)
				if len(q.want) == 0 {
					t.Fatalf("%s: the model expects no output", q.name)
				}
				if !reflect.DeepEqual(q.got, q.want) {
					t.Errorf("%s: %d rows, the model %d; first got %q, first want %q", q.name, len(q.got), len(q.want), first(q.got), first(q.want))
				}
			}
		})
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// nexmarkLines reads a JSON lines file, rendering each object with f.
func nexmarkLines(t *testing.T, path string, f func(map[string]any) string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(line))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		out = append(out, f(m))
	}
	return out
}

func TestNexmarkConfigErrors(t *testing.T) {
	tests := []struct {
		name, config, want string
	}{
		{"unknown key", "{numEvents: 10, numEvent: 5}", "numEvent"},
		{"bad shape", "{rateShape: TRIANGLE}", `rateShape is "TRIANGLE"`},
		{"not an integer", "{numEvents: lots}", "numEvents must be an integer"},
		{"negative ratio", "{hotAuctionRatio: -1}", "hotAuctionRatio"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := "pipeline:\n  transforms:\n    - type: Nexmark\n      config: " + tc.config + "\n    - type: WriteToJson\n      input: Nexmark\n      config: {path: o.jsonl}\n"
			_, err := Load("p.yaml", []byte(src), Options{BaseDir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "p.yaml:") {
				t.Errorf("got %v, want an error at p.yaml naming %q", err, tc.want)
			}
		})
	}
}
