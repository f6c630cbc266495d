package service

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/weir-dev/weir/io/sqlsink"
	"github.com/weir-dev/weir/row"
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/state"
)

// TestFacadeSweep: what one sweep of a façade entry does, on a real
// SQLite façade whose generations' jobs are in the states given: it
// merges the generations whose jobs ended a retention ago into the newest,
// never one behind a generation whose job still runs, and deletes the
// entry only once one generation is left and no live job could join the
// view with a newer one (or make the table a view at all).
func TestFacadeSweep(t *testing.T) {
	t.Parallel()
	type job struct {
		gen   int64
		state record.JobState
		ago   time.Duration // since it entered its state
	}
	tests := []struct {
		name     string
		behind   []int64 // the generations behind the view
		jobs     []job
		wantGens []int64
		wantKept bool
	}{
		{"old job ended a retention ago, new one runs", []int64{1, 2},
			[]job{{1, record.StateDrained, 48 * time.Hour}, {2, record.StateRunning, 48 * time.Hour}}, []int64{2}, false},
		{"old job ended an hour ago", []int64{1, 2},
			[]job{{1, record.StateDrained, time.Hour}, {2, record.StateRunning, 48 * time.Hour}}, []int64{2, 1}, true},
		{"a newer overlap: generation 2's job still runs", []int64{1, 2, 3},
			[]job{{1, record.StateDrained, 48 * time.Hour}, {2, record.StateRunning, 48 * time.Hour}, {3, record.StateRunning, time.Hour}}, []int64{3, 2, 1}, true},
		{"rolled back after the cut-over, the rollback job not behind the view yet", []int64{1, 2},
			[]job{{1, record.StateDrained, 48 * time.Hour}, {2, record.StateDrained, 25 * time.Hour}, {3, record.StateRunning, 25 * time.Hour}}, []int64{2}, true},
		{"rolled back after the cut-over, everything ended", []int64{1, 2, 3},
			[]job{{1, record.StateDrained, 48 * time.Hour}, {2, record.StateDrained, 25 * time.Hour}, {3, record.StateDrained, 25 * time.Hour}}, []int64{3}, false},
		{"not a view yet, the new job runs", nil,
			[]job{{1, record.StateDrained, 48 * time.Hour}, {2, record.StateRunning, 48 * time.Hour}}, nil, true},
		{"not a view, nothing runs", nil,
			[]job{{1, record.StateDrained, 48 * time.Hour}, {2, record.StateCancelled, 48 * time.Hour}}, nil, false},
	}
	schema := row.MustSchema(row.Field{Name: "event_id", Type: row.Of(row.KindString)})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			s, _ := openShifted(t, filepath.Join(dir, "data"))
			table := record.FacadeTable{Driver: sqlsink.DriverSQLite, DSN: filepath.Join(dir, "t.sqlite"), Table: "events"}
			for _, g := range tc.behind {
				sk, err := sqlsink.New(sqlsink.Config{Driver: table.Driver, DSN: table.DSN, Table: table.Table, Mode: sqlsink.ModeAppend,
					SinkID: "sums/Write", Generation: g, Facade: true}, schema)
				if err != nil {
					t.Fatal(err)
				}
				if err := sk.Prepare(ctx); err != nil {
					t.Fatal(err)
				}
				if err := sk.Close(ctx); err != nil {
					t.Fatal(err)
				}
			}
			w := &state.Write{}
			for _, j := range tc.jobs {
				at := s.core.Now().Add(-j.ago)
				rec := &record.Job{ID: fmt.Sprintf("job-g%d", j.gen), Name: "sums", Generation: j.gen, State: j.state, StateTime: at, CreateTime: at}
				if err := core.PutJSON(w, record.JobKey(rec.ID), rec); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.replace.PutFacadeSweeps(w, []record.FacadeTable{table}, "sums"); err != nil {
				t.Fatal(err)
			}
			if err := s.core.Apply(w); err != nil {
				t.Fatal(err)
			}
			if err := s.replace.SweepFacades(ctx); err != nil {
				t.Fatal(err)
			}
			gens, err := (sqlsink.Admin{}).FacadeGenerations(ctx, s.replace.FacadeTarget(table))
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, g := range gens {
				got = append(got, g.Generation)
			}
			if !slices.Equal(got, tc.wantGens) {
				t.Errorf("generations behind the view after the sweep: %v, want %v", got, tc.wantGens)
			}
			sw, err := s.replace.FacadeSweeps()
			if err != nil {
				t.Fatal(err)
			}
			if kept := len(sw) == 1; kept != tc.wantKept {
				t.Errorf("sweep entry kept: %v, want %v (%+v)", kept, tc.wantKept, sw)
			}
		})
	}
}
