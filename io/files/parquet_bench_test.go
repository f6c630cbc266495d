package files

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"
)

type parquetBenchRow struct {
	ID    int64   `parquet:"id,optional"`
	Name  string  `parquet:"name,optional"`
	Price float64 `parquet:"price,optional"`
}

// BenchmarkParquetRead reads a file of 200,000 rows as ReadFromParquet
// does (its schema, then every row), for each codec: the cost of the
// check of its structure and pages is in it.
func BenchmarkParquetRead(b *testing.B) {
	for _, c := range []struct {
		name string
		opt  parquet.WriterOption
	}{
		{"none", parquet.Compression(&parquet.Uncompressed)},
		{"snappy", parquet.Compression(&parquet.Snappy)},
		{"zstd", parquet.Compression(&parquet.Zstd)},
		{"gzip", parquet.Compression(&parquet.Gzip)},
	} {
		b.Run(c.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "in.parquet")
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			w := parquet.NewGenericWriter[parquetBenchRow](f, c.opt)
			rows := make([]parquetBenchRow, 200_000)
			for i := range rows {
				rows[i] = parquetBenchRow{ID: int64(i), Name: fmt.Sprint("name-", i%5000), Price: float64(i%977) / 7}
			}
			if _, err := w.Write(rows); err != nil {
				b.Fatal(err)
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			f.Close()
			b.ResetTimer()
			for b.Loop() {
				sch, err := ParquetSchema(path)
				if err != nil {
					b.Fatal(err)
				}
				n := readSplits(b, NewSource(SourceConfig{Step: "R", Path: path, Format: Parquet, Schema: sch, TimestampField: -1}))
				if n != len(rows) {
					b.Fatalf("read %d rows", n)
				}
			}
		})
	}
}
