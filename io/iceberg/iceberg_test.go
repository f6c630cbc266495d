package iceberg

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go/format"

	"github.com/weir-dev/weir/internal/pqdamage"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/runner/contract"
)

var testSchema = row.MustSchema(
	row.Field{Name: "id", Type: row.Of(row.KindInt)},
	row.Field{Name: "score", Type: row.Of(row.KindFloat)},
	row.Field{Name: "name", Type: row.Of(row.KindString)},
	row.Field{Name: "ok", Type: row.Of(row.KindBool)},
	row.Field{Name: "at", Type: row.Of(row.KindTimestamp)},
)

// testTarget is a SQLite catalog and a warehouse in a fresh directory.
func testTarget(t *testing.T) Target { return benchTarget(t) }

// benchTarget is testTarget for a test or a benchmark.
func benchTarget(t testing.TB) Target {
	t.Helper()
	dir := t.TempDir()
	tg, err := Catalog{Name: "test", BaseDir: dir, Properties: map[string]string{
		"type": "sql", "uri": "sqlite:///catalog.db", "warehouse": "file://" + filepath.Join(dir, "wh"),
	}}.Parse()
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func testRows(n int) []contract.Element {
	out := make([]contract.Element, n)
	for i := range out {
		r := row.New(testSchema)
		r.Values = []any{int64(i), float64(i) / 2, "n" + string(rune('a'+i%26)), i%2 == 0, mtime.Time(1_700_000_000_000 + int64(i))}
		if i == 1 {
			r.Values[2] = nil // a null survives
		}
		out[i] = contract.Element{Value: r}
	}
	return out
}

// writeTable writes rows to a table in a run without checkpoints.
func writeTable(t *testing.T, cfg SinkConfig, rows []contract.Element) {
	t.Helper()
	ctx := context.Background()
	sink, err := NewSink(cfg, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Write(ctx, 0, rows); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// commitTwice writes rows to sink as epoch's, commits them twice (the
// second as a restart would), closes the sink and returns the part.
func commitTwice(t *testing.T, sink *Sink, rows []contract.Element, epoch uint64) []byte {
	t.Helper()
	ctx := context.Background()
	if err := sink.Write(ctx, 0, rows); err != nil {
		t.Fatal(err)
	}
	part, err := sink.PreCommit(ctx, 0, epoch)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := sink.Commit(ctx, epoch, [][]byte{part}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sink.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return part
}

// sameRows checks that rows read back are the rows written, in order.
func sameRows(t *testing.T, rows []*row.Row, in []contract.Element) {
	t.Helper()
	if len(rows) != len(in) {
		t.Fatalf("read %d rows, want %d", len(rows), len(in))
	}
	for i, r := range rows {
		if got, want := r.String(), in[i].Value.(*row.Row).String(); got != want {
			t.Errorf("row %d = %s, want %s", i, got, want)
		}
	}
}

// readAll reads the table's rows (of cfg) in id order.
func readAll(t *testing.T, cfg ReadConfig) (*row.Schema, []*row.Row) {
	t.Helper()
	ctx := context.Background()
	s, err := Describe(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	splits, err := NewSource(cfg, s).Split(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer splits[0].Close()
	var rows []*row.Row
	buf := make([]contract.Element, 3)
	for {
		res, err := splits[0].Read(ctx, buf)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range buf[:res.N] {
			rows = append(rows, e.Value.(*row.Row))
		}
		if res.Done {
			break
		}
	}
	idx := s.Index("id")
	for i := 1; i < len(rows); i++ { // insertion sort by id: files may come in any order
		for j := i; j > 0 && idx >= 0 && rows[j].Values[idx].(int64) < rows[j-1].Values[idx].(int64); j-- {
			rows[j], rows[j-1] = rows[j-1], rows[j]
		}
	}
	return s, rows
}

func TestRoundTripKeepsTypes(t *testing.T) {
	ctx := context.Background()
	tg := testTarget(t)
	sink, err := NewSink(SinkConfig{Target: tg, Table: "db.events"}, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Validate(ctx); err != nil {
		t.Fatal(err)
	}
	in := testRows(7)
	if err := sink.Write(ctx, 0, in[:4]); err != nil {
		t.Fatal(err)
	}
	if err := sink.Write(ctx, 1, in[4:]); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s, rows := readAll(t, ReadConfig{Target: tg, Table: "db.events"})
	if !s.Equal(testSchema) {
		t.Fatalf("schema %s, want %s", s, testSchema)
	}
	sameRows(t, rows, in)
}

func TestReadKeepDrop(t *testing.T) {
	tg := testTarget(t)
	writeTable(t, SinkConfig{Target: tg, Table: "db.t"}, testRows(3))
	for _, tc := range []struct {
		name       string
		keep, drop []string
		want       string
	}{
		{"keep", []string{"name", "id"}, nil, "{id:int,name:string}"},
		{"drop", nil, []string{"score", "at"}, "{id:int,name:string,ok:bool}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rows := readAll(t, ReadConfig{Target: tg, Table: "db.t", Keep: tc.keep, Drop: tc.drop})
			if s.String() != tc.want || len(rows) != 3 {
				t.Fatalf("schema %s with %d rows, want %s with 3", s, len(rows), tc.want)
			}
			if v := rows[2].Values[s.Index("name")]; v != "nc" {
				t.Errorf("row 2 name = %v, want nc", v)
			}
		})
	}
}

// A commit repeated for an epoch (a restart after the commit landed)
// appends nothing; the next epoch appends.
func TestCommitOncePerEpoch(t *testing.T) {
	ctx := context.Background()
	tg := testTarget(t)
	newSink := func() *Sink {
		s, err := NewSink(SinkConfig{Target: tg, Table: "db.once", SinkID: "job-1/write"}, testSchema)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	in := testRows(6)
	part := commitTwice(t, newSink(), in[:3], 1)
	again := newSink() // a new process repeats epoch 1, then commits epoch 2
	if err := again.Commit(ctx, 1, [][]byte{part}); err != nil {
		t.Fatal(err)
	}
	if err := again.Write(ctx, 0, in[3:]); err != nil {
		t.Fatal(err)
	}
	part2, err := again.PreCommit(ctx, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Commit(ctx, 2, [][]byte{part2, nil}); err != nil {
		t.Fatal(err)
	}
	if err := again.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, rows := readAll(t, ReadConfig{Target: tg, Table: "db.once"})
	if len(rows) != 6 {
		t.Fatalf("read %d rows, want 6 (each epoch once)", len(rows))
	}
	tbl, done, err := loadTable(ctx, tg, []string{"db", "once"})
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if e, ok := CommittedEpoch(tbl, "job-1/write"); !ok || e != 2 {
		t.Errorf("committed epoch = %d, %v; want 2", e, ok)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props map[string]string
		want  string
	}{
		{"no type", map[string]string{"uri": "sqlite:///c.db"}, "needs type"},
		{"rest", map[string]string{"type": "rest", "uri": "http://x"}, "weir has the sql (jdbc) catalog, in SQLite or PostgreSQL, and the hadoop catalog"},
		{"hadoop without a warehouse", map[string]string{"type": "hadoop"}, "a hadoop catalog needs warehouse"},
		{"hadoop with a uri", map[string]string{"type": "hadoop", "warehouse": "wh", "uri": "c.db"}, `"uri": a hadoop catalog takes only warehouse`},
		{"hadoop in s3", map[string]string{"type": "hadoop", "warehouse": "s3://b/w"}, "s3:// warehouses are not supported"},
		{"no uri", map[string]string{"type": "sql"}, "needs uri"},
		{"memory", map[string]string{"type": "sql", "uri": "sqlite:///:memory:"}, "SQLite catalog's file"},
		{"mysql", map[string]string{"type": "sql", "uri": "mysql://h/db"}, "SQLite (sqlite:///PATH) or PostgreSQL"},
		{"s3 warehouse", map[string]string{"type": "sql", "uri": "c.db", "warehouse": "s3://b/w"}, "s3:// warehouses are not supported"},
		{"unknown", map[string]string{"type": "sql", "uri": "c.db", "io-impl": "x"}, `"io-impl" is not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Catalog{Properties: tc.props, BaseDir: "/tmp"}.Parse()
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v, want ErrConfig with %q", err, tc.want)
			}
		})
	}
}

func TestParseURIs(t *testing.T) {
	for _, tc := range []struct {
		uri, path, host string
	}{
		{"sqlite:///rel/c.db", "/base/rel/c.db", ""},
		{"sqlite:////abs/c.db", "/abs/c.db", ""},
		{"jdbc:sqlite:file:/abs/c.db", "/abs/c.db", ""},
		{"c.db", "/base/c.db", ""},
		{"jdbc:postgresql://db.example:5432/cat", "", "db.example"},
		{"postgresql+psycopg2://u:p@pg/cat", "", "pg"},
	} {
		tg, err := Catalog{Properties: map[string]string{"type": "sql", "uri": tc.uri, "warehouse": "wh"}, BaseDir: "/base"}.Parse()
		if err != nil || tg.DBPath != tc.path || tg.Host != tc.host || tg.Warehouse != "/base/wh" {
			t.Errorf("%s: path %q host %q warehouse %q err %v; want %q %q /base/wh", tc.uri, tg.DBPath, tg.Host, tg.Warehouse, err, tc.path, tc.host)
		}
	}
}

func TestSinkRefuses(t *testing.T) {
	ctx := context.Background()
	tg := testTarget(t)
	nested := row.MustSchema(row.Field{Name: "l", Type: row.ListOf(row.Of(row.KindInt))})
	if _, err := NewSink(SinkConfig{Target: tg, Table: "db.x"}, nested); err == nil || !strings.Contains(err.Error(), "field l is list<int>") {
		t.Errorf("a list field: %v", err)
	}
	if _, err := NewSink(SinkConfig{Target: tg, Table: "x"}, testSchema); err == nil || !strings.Contains(err.Error(), "NAMESPACE.TABLE") {
		t.Errorf("a table without namespace: %v", err)
	}
	writeTable(t, SinkConfig{Target: tg, Table: "db.y"}, testRows(1))
	other := row.MustSchema(row.Field{Name: "id", Type: row.Of(row.KindString)})
	s2, _ := NewSink(SinkConfig{Target: tg, Table: "db.y"}, other)
	if err := s2.Validate(ctx); err == nil || !strings.Contains(err.Error(), "cannot hold field id") {
		t.Errorf("a string into a long column: %v", err)
	}
	noWh := tg
	noWh.Warehouse = ""
	s3, _ := NewSink(SinkConfig{Target: noWh, Table: "db.z"}, testSchema)
	if err := s3.Validate(ctx); err == nil || !strings.Contains(err.Error(), "needs warehouse") {
		t.Errorf("no warehouse: %v", err)
	}
	denied := errors.New("denied")
	_, err := Describe(ctx, ReadConfig{Target: tg, Table: "db.y", Check: func(string) error { return denied }})
	if !errors.Is(err, denied) {
		t.Errorf("a read outside the file policy: %v", err)
	}
	if _, err := Describe(ctx, ReadConfig{Target: tg, Table: "db.missing"}); err == nil || !strings.Contains(err.Error(), "is not in catalog test") {
		t.Errorf("a missing table: %v", err)
	}
}

// A table the sink creates with Beam's partition_fields is partitioned so,
// and its rows (less the dropped field) read back whole.
func TestPartitionedWrite(t *testing.T) {
	ctx := context.Background()
	tg := testTarget(t)
	parts := []string{"day(at)", "bucket(id, 4)", "ok", "truncate(name, 1)"}
	sink, err := NewSink(SinkConfig{Target: tg, Table: "db.parts", PartitionFields: parts, Drop: []string{"score"},
		Properties: map[string]string{"owner": "weir-test"}}, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	in := testRows(9)
	if err := sink.Write(ctx, 0, in); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(ctx); err != nil {
		t.Fatal(err)
	}
	tbl, done, err := loadTable(ctx, tg, []string{"db", "parts"})
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	var names []string
	spec := tbl.Spec()
	for _, f := range spec.Fields() {
		names = append(names, f.Name+"="+f.Transform.String())
	}
	if got, want := strings.Join(names, " "), "at_day=day id_bucket=bucket[4] ok=identity name_trunc=truncate[1]"; got != want {
		t.Errorf("partition spec %s, want %s", got, want)
	}
	if got := tbl.Properties()["owner"]; got != "weir-test" {
		t.Errorf("table property owner = %q", got)
	}
	s, rows := readAll(t, ReadConfig{Target: tg, Table: "db.parts"})
	if s.Index("score") >= 0 || len(rows) != len(in) {
		t.Fatalf("schema %s with %d rows, want no score and %d rows", s, len(rows), len(in))
	}
	for i, r := range rows {
		want := in[i].Value.(*row.Row)
		for _, f := range s.Fields {
			if g, w := r.Values[s.Index(f.Name)], want.Values[want.Schema.Index(f.Name)]; g != w {
				t.Errorf("row %d %s = %v, want %v", i, f.Name, g, w)
			}
		}
	}
}

func TestPartitionFieldsRefused(t *testing.T) {
	tg := testTarget(t)
	for _, pf := range []string{"bucket(id)", "week(at)", "nosuch", "day(name)", "a b"} {
		_, err := NewSink(SinkConfig{Target: tg, Table: "db.p", PartitionFields: []string{pf}}, testSchema)
		if !errors.Is(err, ErrConfig) {
			t.Errorf("partition field %q: %v, want ErrConfig", pf, err)
		}
	}
	if _, err := NewSink(SinkConfig{Target: tg, Table: "db.p", Keep: []string{"id"}, Drop: []string{"ok"}}, testSchema); !errors.Is(err, ErrConfig) {
		t.Errorf("keep and drop: %v", err)
	}
}

// TestPostgresCatalog runs a write and a read through a SQL catalog in
// the CI's PostgreSQL (WEIR_TEST_POSTGRES_DSN overrides it), skipped when
// it is not reachable; its own catalog name keeps it apart, and it drops
// what it made.
func TestPostgresCatalog(t *testing.T) {
	ctx := context.Background()
	dsn := os.Getenv("WEIR_TEST_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	dir := t.TempDir()
	tg, err := Catalog{Name: fmt.Sprintf("weir_test_%d_%d", os.Getpid(), time.Now().UnixNano()), BaseDir: dir,
		Properties: map[string]string{"type": "jdbc", "uri": "jdbc:" + strings.Replace(dsn, "postgres://", "postgresql://", 1), "warehouse": "wh"}}.Parse()
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	cat, closeCat, err := open(pctx, tg)
	cancel()
	if err != nil {
		t.Skipf("PostgreSQL is not reachable: %v", err)
	}
	defer closeCat()
	defer func() {
		if err := cat.DropTable(ctx, []string{"db", "pg"}); err != nil {
			t.Error(err)
		}
		if err := cat.DropNamespace(ctx, []string{"db"}); err != nil {
			t.Error(err)
		}
	}()
	sink, err := NewSink(SinkConfig{Target: tg, Table: "db.pg", SinkID: "pg"}, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	in := testRows(4)
	commitTwice(t, sink, in, 7)
	_, rows := readAll(t, ReadConfig{Target: tg, Table: "db.pg"})
	sameRows(t, rows, in)
}

// A read asks the file policy about every file it opens, before opening
// it: the manifest list and manifests, then the data files.
func TestReadFilePolicy(t *testing.T) {
	ctx := context.Background()
	tg := testTarget(t)
	writeTable(t, SinkConfig{Target: tg, Table: "db.f"}, testRows(2))
	denied := errors.New("denied")
	for _, suffix := range []string{".avro", ".parquet"} {
		cfg := ReadConfig{Target: tg, Table: "db.f", Check: func(p string) error {
			if strings.HasSuffix(p, suffix) {
				return denied
			}
			return nil
		}}
		s, err := Describe(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		splits, _ := NewSource(cfg, s).Split(ctx, 1)
		_, err = splits[0].Read(ctx, make([]contract.Element, 4))
		splits[0].Close()
		if !errors.Is(err, denied) {
			t.Errorf("%s files denied: read err = %v, want the denial", suffix, err)
		}
	}
}

// TestSinkBufferedBytes: the sink says how much it holds until a
// pre-commit takes it (the runner stops the sources above a bound): each
// worker's rows count the bytes of their values, and a worker's
// pre-commit takes off its own.
func TestSinkBufferedBytes(t *testing.T) {
	ctx := context.Background()
	sink, err := NewSink(SinkConfig{Target: testTarget(t), Table: "db.held", SinkID: "job-1/write"}, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close(ctx)
	rows := testRows(4)
	// Per row: id and score 8 each, the time 8, the bool 1, the name
	// "nX" 2+4 (row 1's is null: 1).
	const four = 4*(8+8+8+1) + 3*6 + 1
	if err := sink.Write(ctx, 0, rows); err != nil {
		t.Fatal(err)
	}
	if err := sink.Write(ctx, 1, rows[:1]); err != nil {
		t.Fatal(err)
	}
	if got, want := sink.BufferedBytes(), int64(four+31); got != want {
		t.Fatalf("holding 5 rows: %d bytes, want %d", got, want)
	}
	if _, err := sink.PreCommit(ctx, 0, 1); err != nil {
		t.Fatal(err)
	}
	if got := sink.BufferedBytes(); got != 31 {
		t.Fatalf("after worker 0's pre-commit: %d bytes, want worker 1's 31", got)
	}
	if _, err := sink.PreCommit(ctx, 1, 1); err != nil {
		t.Fatal(err)
	}
	if got := sink.BufferedBytes(); got != 0 {
		t.Fatalf("after both pre-commits: %d bytes, want 0", got)
	}
}

// TestReadDamagedTableFiles: a read of a table whose data file, manifest
// or manifest list is damaged fails with an error that names the file, or
// reads what the damage left readable; it never panics, and allocates
// little. iceberg-go plans and reads on goroutines of its own, where a
// damaged manifest's header and a damaged data page's header (a changed
// byte was enough) were dereferenced as nil, and damaged pages panicked
// in Arrow's decoders ("unimplemented encoding type"), ending the
// process; a footer's damaged Arrow schema was a fatal out-of-memory.
func TestReadDamagedTableFiles(t *testing.T) {
	ctx := context.Background()
	tg := testTarget(t)
	writeTable(t, SinkConfig{Target: tg, Table: "db.d"}, testRows(500))
	cfg := ReadConfig{Target: tg, Table: "db.d"}
	s, err := Describe(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	read := func() error { return readToEnd(t, cfg, s) }
	if err := read(); err != nil {
		t.Fatalf("the valid table: %v", err)
	}
	dir := filepath.Join(tg.Warehouse, "db.db", "d")
	// pages is the part of a Parquet file before its footer.
	pages := func(b []byte) (int, int) { return 4, len(b) - 8 - int(binary.LittleEndian.Uint32(b[len(b)-8:])) }
	whole := func(b []byte) (int, int) { return 0, len(b) }
	for _, tc := range []struct {
		name, glob string
		in         func([]byte) (int, int) // the bytes damaged
		tries      int
	}{
		// Most damage to a footer is refused by the check of its
		// structure; damage to the pages reaches Arrow's decoders.
		{"data file's pages", "data/*.parquet", pages, 1000},
		{"data file", "data/*.parquet", whole, 500},
		{"manifest", "metadata/*-m[0-9]*.avro", whole, 600},
		{"manifest list", "metadata/snap-*.avro", whole, 600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			paths, err := filepath.Glob(filepath.Join(dir, tc.glob))
			if err != nil || len(paths) != 1 {
				t.Fatalf("%s: files %v, %v: want one", tc.glob, paths, err)
			}
			path := paths[0]
			valid, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(path, valid, 0o644)
			rng := rand.New(rand.NewPCG(7, uint64(len(tc.name))))
			refused := 0
			var most uint64 // the most bytes a read allocated
			lo, hi := tc.in(valid)
			for range tc.tries {
				b := append([]byte(nil), valid...)
				for range 1 + rng.IntN(3) {
					b[lo+rng.IntN(hi-lo)] = byte(rng.IntN(256))
				}
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				err := read()
				runtime.ReadMemStats(&after)
				if n := after.TotalAlloc - before.TotalAlloc; n > 256<<20 {
					t.Fatalf("a read with a damaged %s of %d bytes allocated %d MiB", tc.name, len(b), n>>20)
				} else {
					most = max(most, n)
				}
				if err == nil {
					continue
				}
				refused++
				// A damaged file names itself, or the file it now
				// names, which cannot be opened.
				var opening *fs.PathError
				if errors.Is(err, ErrDataFile) && !strings.Contains(err.Error(), path) && !errors.As(err, &opening) {
					t.Fatalf("a damaged %s: %v, which does not name %s", tc.name, err, path)
				}
			}
			if refused == 0 {
				t.Fatalf("none of %d damaged files was refused: the damage changed nothing", tc.tries)
			}
			t.Logf("%d of %d damaged files refused; a read allocated at most %d KiB", refused, tc.tries, most>>10)
		})
	}
}

// TestReadPageArrowCannotDecode: a data page whose header states an
// encoding Arrow's reader does not implement for its column (an INT64
// column in DELTA_LENGTH_BYTE_ARRAY) is a read error naming the file.
// Arrow panics on it, on a goroutine of iceberg-go's, which ended the
// process; weir's own read of the file recovers it first.
func TestReadPageArrowCannotDecode(t *testing.T) {
	ctx := context.Background()
	tg := testTarget(t)
	data := undecodableTable(t, tg, "e", 0) // id, INT64
	cfg := ReadConfig{Target: tg, Table: "db.e"}
	s, err := Describe(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = readToEnd(t, cfg, s)
	if !errors.Is(err, ErrDataFile) || !strings.Contains(err.Error(), data) || !strings.Contains(err.Error(), "unimplemented") {
		t.Fatalf("read error %v, want ErrDataFile naming %s and the unimplemented encoding", err, data)
	}
}

// undecodableTable writes table db.NAME of 300 rows in one data file, and
// makes the first page of its column col state DELTA_LENGTH_BYTE_ARRAY,
// an encoding Arrow does not implement for numbers. It returns the file's
// path.
func undecodableTable(t *testing.T, tg Target, name string, col int) string {
	t.Helper()
	writeTable(t, SinkConfig{Target: tg, Table: "db." + name}, testRows(300))
	paths, err := filepath.Glob(filepath.Join(tg.Warehouse, "db.db", name, "data", "*.parquet"))
	if err != nil || len(paths) != 1 {
		t.Fatalf("data files %v, %v: want one", paths, err)
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if b, err = pqdamage.SetEncoding(b, col, format.DeltaLengthByteArray); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(paths[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	return paths[0]
}

// readToEnd reads the table of cfg (of schema s) to its end, and returns
// the error that stopped it.
func readToEnd(t *testing.T, cfg ReadConfig, s *row.Schema) error {
	t.Helper()
	ctx := context.Background()
	splits, err := NewSource(cfg, s).Split(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer splits[0].Close()
	buf := make([]contract.Element, 64)
	for {
		res, err := splits[0].Read(ctx, buf)
		if err != nil || res.Done {
			return err
		}
	}
}

// TestReadChecksTheColumnsRead: the check before a read reads the columns
// iceberg-go reads (the selected ones and the filter's), so a damaged
// column that neither selects costs nothing and fails nothing, while one
// that the selection or the filter reads fails the read.
func TestReadChecksTheColumnsRead(t *testing.T) {
	ctx := context.Background()
	tg := testTarget(t)
	undecodableTable(t, tg, "c", 1) // score, DOUBLE
	for _, tc := range []struct {
		name   string
		cfg    ReadConfig
		failed bool
	}{
		{"another column kept", ReadConfig{Keep: []string{"id", "name"}}, false},
		{"the column kept", ReadConfig{Keep: []string{"id", "score"}}, true},
		{"the column dropped", ReadConfig{Drop: []string{"score"}}, false},
		{"the column filtered on", ReadConfig{Keep: []string{"id"}, Filter: "score < 100"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Target, cfg.Table = tg, "db.c"
			s, err := Describe(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			err = readToEnd(t, cfg, s)
			if tc.failed != (err != nil) || err != nil && !errors.Is(err, ErrDataFile) {
				t.Fatalf("read error %v, want a failure %v (ErrDataFile)", err, tc.failed)
			}
		})
	}
}
