package diffcmd

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/io/files"
)

// TestParseOutputSpec: each specifier form parses to its kind, path, table
// or job; a malformed one is a usage error naming the problem.
func TestParseOutputSpec(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		spec    string
		want    outputSpec
		wantErr string
	}{
		{spec: "out/totals.jsonl", want: outputSpec{kind: specFile, path: "out/totals.jsonl", format: 0}},
		{spec: "out/totals-*.csv", want: outputSpec{kind: specFile, path: "out/totals-*.csv", format: 1}},
		{spec: "export.PARQUET", want: outputSpec{kind: specFile, path: "export.PARQUET", format: 3}},
		{spec: "export.avro", want: outputSpec{kind: specFile, path: "export.avro", format: 2}},
		{spec: dir, want: outputSpec{kind: specFile, path: dir}},
		{spec: "sqlite:/var/weir/out.db#region_totals", want: outputSpec{kind: specSQLite, path: "/var/weir/out.db", table: "region_totals"}},
		{spec: "sqlite:data#x.db#main.totals", want: outputSpec{kind: specSQLite, path: "data#x.db", table: "main.totals"}},
		{spec: "postgres://u@h:5432/db?sslmode=disable#public.totals", want: outputSpec{kind: specPostgres, dsn: "postgres://u@h:5432/db?sslmode=disable", table: "public.totals"}},
		{spec: "job:regional-totals/WriteTotals", want: outputSpec{kind: specJob, job: "regional-totals", step: "WriteTotals"}},
		{spec: "", wantErr: `output "": empty`},
		{spec: "out/lines.txt", want: outputSpec{kind: specFile, path: "out/lines.txt", format: files.Text}},
		{spec: "out/totals.xml", wantErr: `output "out/totals.xml": cannot tell the format from the extension`},
		{spec: "sqlite:out.db", wantErr: `output "sqlite:out.db": a SQLite table is sqlite:PATH#TABLE, and the #TABLE is missing`},
		{spec: "sqlite:#t", wantErr: `output "sqlite:#t": no database file before #TABLE`},
		{spec: "sqlite:out.db#", wantErr: `output "sqlite:out.db#": no table after #`},
		{spec: "postgres://h/db", wantErr: `output "postgres://h/db": a PostgreSQL table is postgres://...#TABLE`},
		{spec: "postgres://u:s3cret@h/db", wantErr: `output "postgres://u:xxxxx@h/db": a PostgreSQL table is postgres://...#TABLE`},
		{spec: "mysql://h/db#t", wantErr: `output "mysql://h/db#t": unknown scheme`},
		{spec: "job:", wantErr: `output "job:": "" is not a job name`},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := parseOutputSpec(tt.spec)
			if tt.wantErr != "" {
				var ee *cli.ExitError
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.As(err, &ee) || ee.Code != cli.ExitUsage {
					t.Fatalf("error %v, want a usage error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.want.raw = tt.spec
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
