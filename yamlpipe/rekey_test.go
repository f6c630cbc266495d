package yamlpipe

import (
	"errors"
	"strings"
	"testing"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/yamlpipe/combine"
	"github.com/weir-dev/weir/yamlpipe/keyenc"
)

// shardsHead is a pipeline whose Combine Totals keeps total and n per
// (k, shard): the running version of the re-key tests. %s: the group_by
// fields, then the step's migrations.
const shardsHead = "pipeline:\n  transforms:\n    - type: Create\n      name: O\n      config:\n        elements: [{k: 1, shard: 2, amount: 1}]\n" +
	"    - type: Combine\n      name: Totals\n      input: O\n%s      config:\n        group_by: [%s]\n        combine:\n" +
	"          total: {value: amount, fn: sum}\n          n: {value: amount, fn: count}\n"

func shardsAggregator(tb testing.TB, migrations, groupBy string) *combine.Aggregator {
	tb.Helper()
	return totalsAggregator(tb, strings.Replace(strings.Replace(shardsHead, "%s", migrations, 1), "%s", groupBy, 1))
}

// TestRekeyKeys: the re-key of a stored (k, shard) key is the key
// encoding of the new group_by values, as the new version's elements are
// keyed (so they meet in one key group); keys it stores carry its mark,
// which a version without the declaration decodes past, and an
// expression that fails is an error naming the field.
func TestRekeyKeys(t *testing.T) {
	old := shardsAggregator(t, "", "k, shard")
	oldKey := string(old.AppendKey(nil, rowOf(t, old, 7, 3)))
	for _, tc := range []struct {
		name, migrations string
		want             any
	}{
		{"projection", "      migrations: {rekey: {from: [k, shard]}}\n", int64(7)},
		{"expression", "      migrations: {rekey: {from: [k, shard], key: {k: \"k * 10 + shard\"}}}\n", int64(73)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := shardsAggregator(t, tc.migrations, "k")
			if !a.RekeysState() {
				t.Fatal("the step does not declare its re-key")
			}
			got, _, _, err := a.Rekey(nil, nil, oldKey)
			if err != nil {
				t.Fatal(err)
			}
			if want := keyenc.Append(nil, tc.want); string(got) != string(want) {
				t.Errorf("re-keyed to %x, want %x (the key of k=%v)", got, want, tc.want)
			}
			kb, err := a.AppendEncodedKeyFrom(nil, string(got))
			if err != nil {
				t.Fatal(err)
			}
			if !a.CurrentKey(kb) {
				t.Error("a key the re-keying version stores is not current to it")
			}
			oldKB, _ := old.AppendEncodedKeyFrom(nil, oldKey)
			if a.CurrentKey(oldKB) {
				t.Error("the earlier version's key is current to the re-keying version")
			}
			plain := shardsAggregator(t, "", "k")
			if k, err := plain.DecodeKey(kb); err != nil || k.([]any)[0] != tc.want {
				t.Errorf("a version without the declaration decodes the marked key as %v, %v", k, err)
			}
		})
	}
	a := shardsAggregator(t, "      migrations: {rekey: {from: [k, shard], key: {k: \"k / (shard - 3)\"}}}\n", "k")
	_, _, oldVals, err := a.Rekey(nil, nil, oldKey)
	if err == nil || !strings.Contains(err.Error(), "re-key expression of k") {
		t.Errorf("a failing expression: %v", err)
	}
	if vals, _ := oldVals.([]any); len(vals) != 2 || vals[0] != int64(7) || vals[1] != int64(3) {
		t.Errorf("the earlier key's values, reported with the failure: %v", oldVals)
	}
	if a.StateRejects()[contract.RekeyFailed] != 1 {
		t.Errorf("rejects %v, want the failed re-key counted", a.StateRejects())
	}
	// The scratch the failed call returned serves the next call whole.
	if got, _, _, err := a.Rekey(nil, nil, oldKey); err == nil || got != nil {
		t.Errorf("a second failing call: %x, %v", got, err)
	}
}

// rowOf is a row of a's input with k, shard and amount 1.
func rowOf(t *testing.T, a *combine.Aggregator, k, shard int64) *row.Row {
	t.Helper()
	s, err := row.NewSchema(row.Field{Name: "k", Type: row.Of(row.KindInt)}, row.Field{Name: "shard", Type: row.Of(row.KindInt)}, row.Field{Name: "amount", Type: row.Of(row.KindInt)})
	if err != nil {
		t.Fatal(err)
	}
	r := row.New(s)
	r.Values[0], r.Values[1], r.Values[2] = k, shard, int64(1)
	return r
}

// BenchmarkRekey measures what a re-key costs per stored key and window,
// beyond a restore: computing the new key from the stored one (by
// projection, and by a CEL expression) and merging its decoded
// accumulator into the new key's. Per-key figures: 1e9 / ns/op keys per
// second on one core.
//
//	go test -run XXX -bench Rekey ./yamlpipe
func BenchmarkRekey(b *testing.B) {
	old := shardsAggregator(b, "", "k, shard")
	oldKey := string(old.AppendKey(nil, rowOf(&testing.T{}, old, 7, 3)))
	stored := storedShard(b, old)
	for _, v := range []struct{ name, migrations string }{
		{"projection", "      migrations: {rekey: {from: [k, shard]}}\n"},
		{"expression", "      migrations: {rekey: {from: [k, shard], key: {k: \"k * 10 + shard\"}}}\n"},
	} {
		a := shardsAggregator(b, v.migrations, "k")
		into := a.NewAccumulator()
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				var err error
				if buf, _, _, err = a.Rekey(buf[:0], nil, oldKey); err != nil {
					b.Fatal(err)
				}
				acc, err := a.DecodeState(contract.AccumulatorCell, stored)
				if err != nil {
					b.Fatal(err)
				}
				into = a.MergeAccumulators(into, acc)
			}
		})
	}
}

// storedShard is what the running version stored for (7, 3): total 4200,
// n 12.
func storedShard(tb testing.TB, old *combine.Aggregator) []byte {
	tb.Helper()
	in := row.MustSchema(row.Field{Name: "k", Type: row.Of(row.KindInt)}, row.Field{Name: "shard", Type: row.Of(row.KindInt)}, row.Field{Name: "amount", Type: row.Of(row.KindInt)})
	stored := old.NewAccumulator()
	for range 12 {
		var err error
		if stored, err = old.AddInputErr(stored, &contract.Element{Value: &row.Row{Schema: in, Values: []any{int64(7), int64(3), int64(350)}}}); err != nil {
			tb.Fatal(err)
		}
	}
	enc, err := old.AppendEncodedStateFor(nil, string(keyenc.Append(keyenc.Append(nil, int64(7)), int64(3))), contract.AccumulatorCell, stored)
	if err != nil {
		tb.Fatal(err)
	}
	return enc
}

// TestRekeyTableValues: the values a table returns for an earlier key
// (int64 for an int, as both databases return it) map to the new key's
// values as the stored key's do; a value of another type names the field.
func TestRekeyTableValues(t *testing.T) {
	a := shardsAggregator(t, "      migrations: {rekey: {from: [k, shard], key: {k: \"k * 10 + shard\"}}}\n", "k")
	got, err := a.KeyMigration.MapValues([]any{int64(7), int64(3)})
	if err != nil || len(got) != 1 || got[0] != int64(73) {
		t.Errorf("mapValues(7, 3) = %v, %v; want [73]", got, err)
	}
	if _, err := a.KeyMigration.MapValues([]any{"seven", int64(3)}); err == nil || !strings.Contains(err.Error(), "of k is not a int") {
		t.Errorf("a string for an int field: %v", err)
	}
}

// TestRekeyTableKeyRefusedAtLoad: a WriteToSql keyed by other fields than
// the group_by of the Combine that re-keys its rows is refused at load,
// with its position and SQL_SCHEMA_CHANGE_REFUSED's cause, when the
// replaced job's Combine declared no re-key.
func TestRekeyTableKeyRefusedAtLoad(t *testing.T) {
	y := strings.Replace(strings.Replace(shardsHead, "%s", "      migrations: {rekey: {from: [k, shard]}}\n", 1), "%s", "k", 1) +
		"    - type: WriteToSql\n      name: Write\n      input: Totals\n      config: {table: totals, key: [k, n]}\n"
	dir := t.TempDir()
	job := &JobEnv{Name: "j", ID: "j1", Generation: 2, DataDir: dir, PriorKeyLayouts: map[string]string{"Totals": ""}}
	_, err := Load("p.yaml", []byte(y), Options{BaseDir: dir, Job: job, GraphOnly: true})
	if !errors.Is(err, ErrSchemaChange) || !strings.Contains(err.Error(), "p.yaml:19:36:") || !strings.Contains(err.Error(), "is not the group_by (k) of Totals") {
		t.Errorf("load: %v; want a positioned schema change refusal", err)
	}
	// Without a replaced job, nothing is re-keyed: the same file loads.
	job.PriorKeyLayouts = nil
	if _, err := Load("p.yaml", []byte(y), Options{BaseDir: dir, Job: job, GraphOnly: true}); err != nil {
		t.Errorf("load without a replaced job: %v", err)
	}
}
