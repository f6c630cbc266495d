package iceberg

// This file checks a table's Parquet data and delete files before
// iceberg-go reads them. iceberg-go reads files on goroutines of its own,
// through Apache Arrow's Parquet reader, which trusts what a file states:
// a damaged file (a changed byte was enough) made it dereference a nil
// header or index past a buffer there, and a panic on another goroutine
// ends the process, every job of the server with it. So each file a read
// will open is first checked for its structure (package parquetcheck:
// stated sizes within the file and the bounds) and then read whole, here,
// on the caller's goroutine, with the same reader, where a panic is
// recovered into an error that names the file. The columns are read on
// goroutines of the check's own (as many as GOMAXPROCS), each recovering.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/apache/iceberg-go"

	"github.com/weir-dev/weir/io/parquetcheck"
)

// ErrDataFile says a data or delete file of a table cannot be read: it is
// damaged or is not Parquet.
var ErrDataFile = errors.New("a table file cannot be read")

// checkBatchRows is the rows a check reads at a time.
const checkBatchRows = 4096

// checkTableFile checks the table file f (a data or delete file) at the
// local path p, unless it is not Parquet (a deletion vector is a Puffin
// file, which iceberg-go reads itself). Of a data file, only the columns
// of the fields ids holds are read (those iceberg-go reads); of a delete
// file, every column.
func checkTableFile(ctx context.Context, f iceberg.DataFile, p string, ids map[int]bool) error {
	if f.FileFormat() != iceberg.ParquetFile {
		return nil
	}
	if f.ContentType() != iceberg.EntryContentData {
		ids = nil
	}
	if err := checkParquet(ctx, p, f.ContentType() == iceberg.EntryContentPosDeletes, ids); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrDataFile, p, err)
	}
	return nil
}

// checkParquet checks the Parquet file at p: its structure, then every
// value of the columns of the top-level fields ids holds (all when ids is
// nil, or when the file's fields carry no IDs), read as iceberg-go reads
// them (a position delete file's path column as a dictionary,
// posDeletes).
func checkParquet(ctx context.Context, p string, posDeletes bool, ids map[int]bool) (err error) {
	fh, err := os.Open(p)
	if err != nil {
		return err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return err
	}
	md, dataEnd, err := parquetcheck.Metadata(fh, st.Size())
	if err != nil {
		return err
	}
	for _, kv := range md.KeyValueMetadata {
		if kv.Key == "ARROW:schema" {
			if err := checkArrowSchemaMeta(kv.Value); err != nil {
				return err
			}
		}
	}
	defer recoverCorrupt(&err)
	mem := memory.NewGoAllocator()
	rdr, err := file.NewParquetReader(fh, file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		return err
	}
	defer rdr.Close()
	props := pqarrow.ArrowReadProperties{BatchSize: checkBatchRows} // Parallel would read on goroutines that do not recover
	if posDeletes {
		props.SetReadDict(0, true)
	}
	fr, err := pqarrow.NewFileReader(rdr, props, mem)
	if err != nil {
		return err
	}
	leaves := projectedLeaves(rdr.MetaData().Schema, ids)
	if len(leaves) == 0 {
		return nil // iceberg-go reads none of its columns
	}
	// The pages of those columns (a leaf's index is its chunk's in every
	// row group).
	if err := parquetcheck.ColumnPages(fh, md, dataEnd, leaves); err != nil {
		return err
	}
	groups := make([]int, rdr.NumRowGroups())
	for i := range groups {
		groups[i] = i
	}
	cols, _, err := fr.GetFieldReaders(ctx, leaves, groups)
	if err != nil {
		return err
	}
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	errs := make([]error, len(cols))
	next := make(chan int, len(cols))
	for i := range cols {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range min(len(cols), runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for i := range next {
				errs[i] = readColumn(ctx, cols[i])
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// projectedLeaves returns the leaf columns of sc whose top-level field's
// ID ids holds; every leaf when ids is nil or no field carries an ID.
func projectedLeaves(sc *schema.Schema, ids map[int]bool) []int {
	var all, some []int
	withIDs := false
	for i := range sc.NumColumns() {
		id := sc.ColumnRoot(i).FieldID()
		withIDs = withIDs || id >= 0
		all = append(all, i)
		if ids[int(id)] {
			some = append(some, i)
		}
	}
	if ids == nil || !withIDs {
		return all
	}
	return some
}

// readColumn reads every value of the column c, recovering a panic of
// the reader.
func readColumn(ctx context.Context, c *pqarrow.ColumnReader) (err error) {
	defer recoverCorrupt(&err)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		chunk, err := c.NextBatch(checkBatchRows)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n := chunk.Len()
		chunk.Release()
		if n == 0 {
			return nil
		}
	}
}

// recoverCorrupt turns a panic of Arrow's reader into *err.
func recoverCorrupt(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: reading it: %v", parquetcheck.ErrCorrupt, r)
	}
}
