package service

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/io/sqlsink"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/service/record"
)

// refusingCommits is a SQL sink whose commits fail while refuse is set, as
// a database that is busy or away would (or a table locked by a writer
// that was killed).
type refusingCommits struct {
	*sqlsink.Sink
	refuse *atomic.Bool
	tried  *atomic.Int64
}

func (r refusingCommits) Commit(ctx context.Context, epoch uint64, parts [][]byte) error {
	if r.refuse.Load() {
		r.tried.Add(1)
		return errors.New("injected: the database is busy")
	}
	return r.Sink.Commit(ctx, epoch, parts)
}

// TestRestartWaitsForItsSinks: a job whose sinks refuse, as it starts,
// the commit of its last checkpoint repeated (in case the process stopped
// between the checkpoint's write and its commit) for a reason that may
// pass is not FAILED: it stays RUNNING with condition
// SINK_UNAVAILABLE, is started again on the retry interval, and once
// the sink accepts it goes on and ends with exact counts.
func TestRestartWaitsForItsSinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "counts.sqlite")
	ctx := context.Background()
	var refuse atomic.Bool
	var tried atomic.Int64
	program := func(job weir.JobInfo) (*weir.Pipeline, error) {
		p := weir.NewJobPipeline(job)
		s := p.Root()
		// Every checkpoint commits rows, so the one repeated at the start
		// has some.
		ev := weir.Generate(s, "Events", weir.GenerateConfig{Count: programCount, Rate: 500}, func(i int64) int64 { return i })
		schema := row.MustSchema(row.Field{Name: "key", Type: row.Of(row.KindString)}, row.Field{Name: "n", Type: row.Of(row.KindInt)})
		rows := weir.Map(s, "ToRow", ev, func(i int64) *row.Row {
			return &row.Row{Schema: schema, Values: []any{"e" + strconv.FormatInt(i, 10), i}}
		})
		sink, err := sqlsink.New(sqlsink.Config{DSN: db, Table: "counts", Key: []string{"key"}, SinkID: job.ID + "/WriteCounts",
			JobID: job.ID, Generation: job.Generation}, schema)
		if err != nil {
			return nil, err
		}
		weir.Write(s, "WriteCounts", rows, refusingCommits{Sink: sink, refuse: &refuse, tried: &tried}, weir.WithSinkIdentity("sql", "sqlite:counts"))
		return p, nil
	}
	open := func() *Service {
		s, err := Open(ctx, Options{DataDir: dir, CheckpointInterval: 50 * time.Millisecond, StorageRetryInterval: 100 * time.Millisecond,
			Clock: testClock{base: time.Now()}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Program: program})
		if err != nil {
			t.Fatalf("opening the service: %v", err)
		}
		return s
	}
	s := open()
	if _, err := s.StartProgram(ctx, ProgramRequest{Name: "counts", Program: "v1"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, "counts", "a checkpoint", checkpointed(3))
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}

	refuse.Store(true)
	s = open()
	defer s.Close(ctx)
	// A Go program's job resumes when its program starts again.
	if _, err := s.StartProgram(ctx, ProgramRequest{Name: "counts", Program: "v1"}); err != nil {
		t.Fatal(err)
	}
	waiting := waitFor(t, s, "counts", "the SINK_UNAVAILABLE condition", func(j *record.Job) bool {
		return j.Condition != nil || j.State.Terminal()
	})
	if waiting.State != record.StateRunning || waiting.Condition.Code != errcode.SinkUnavailable ||
		!strings.Contains(waiting.Condition.Message, "injected: the database is busy") {
		t.Fatalf("after the repeated commit failed: state %s (%s), condition %+v; want RUNNING with SINK_UNAVAILABLE naming the cause",
			waiting.State, waiting.Error, waiting.Condition)
	}
	for n := tried.Load(); tried.Load() < n+2; {
		waitFor(t, s, "counts", "a retry", func(*record.Job) bool { return tried.Load() >= n+2 })
	}
	refuse.Store(false)
	done := waitDone(t, s, "counts")
	if done.State != record.StateDone {
		t.Fatalf("job ended %s (%s)", done.State, done.Error)
	}
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var n, distinct, sum int64
	if err := conn.QueryRow(`SELECT count(*), count(DISTINCT key), coalesce(sum(n), 0) FROM counts`).Scan(&n, &distinct, &sum); err != nil {
		t.Fatal(err)
	}
	if want := int64(programCount); n != want || distinct != want || sum != want*(want-1)/2 {
		t.Errorf("the table holds %d rows (%d keys, n adding up to %d), want each of the %d events once", n, distinct, sum, want)
	}
}
