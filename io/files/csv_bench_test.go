package files

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

// BenchmarkCSVRead reads a file of 200,000 records of three columns (one
// quoted) as ReadFromCsv does: the cost of bounding a record is in it.
func BenchmarkCSVRead(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("id,name,price\n")
	const rows = 200_000
	for i := range rows {
		fmt.Fprintf(&sb, "%d,\"name, %d\",%g\n", i, i%5000, float64(i%977)/7)
	}
	path := filepath.Join(b.TempDir(), "in.csv")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	sch := row.MustSchema(row.Field{Name: "id", Type: row.Of(row.KindInt)}, row.Field{Name: "name", Type: row.Of(row.KindString)}, row.Field{Name: "price", Type: row.Of(row.KindFloat)})
	b.SetBytes(int64(sb.Len()))
	for b.Loop() {
		if n := readSplits(b, NewSource(SourceConfig{Step: "R", Path: path, Format: CSV, Schema: sch, TimestampField: -1})); n != rows {
			b.Fatalf("read %d elements, want %d", n, rows)
		}
	}
}

// readSplits reads every element of src, in one split, as a benchmark's
// job would, and returns how many there were.
func readSplits(b *testing.B, src *Source) int {
	b.Helper()
	splits, err := src.Split(context.Background(), 1)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]contract.Element, 256)
	n := 0
	for _, sp := range splits {
		for {
			res, err := sp.Read(context.Background(), buf)
			if err != nil {
				b.Fatal(err)
			}
			n += res.N
			if res.Done {
				break
			}
		}
		sp.Close()
	}
	return n
}
