package yamlpipe

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/io/jdbc"
)

// TestJdbcTransforms runs Beam's JDBC transforms with Beam's config keys
// against the CI's PostgreSQL and MariaDB: a table read (ReadFromPostgres,
// ReadFromMySql), summed per region, inserted into another table
// (WriteToPostgres, WriteToMySql), and a query read through ReadFromJdbc.
func TestJdbcTransforms(t *testing.T) {
	for _, tc := range []struct {
		typ, url, user, pass, read, write, driver, dsn string
	}{
		{jdbc.Postgres, "jdbc:postgresql://127.0.0.1:5432/test?sslmode=disable", "postgres", "", "ReadFromPostgres", "WriteToPostgres",
			"pgx", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"},
		{jdbc.MySQL, "jdbc:mysql://127.0.0.1:3306/test", "weir", "weir", "ReadFromMySql", "WriteToMySql",
			"mysql", "weir:weir@tcp(127.0.0.1:3306)/test"},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			db, err := sql.Open(tc.driver, tc.dsn)
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err = db.PingContext(ctx)
				cancel()
			}
			if err != nil {
				t.Skipf("%s is not reachable: %v", tc.typ, err)
			}
			defer db.Close()
			src, dst := fmt.Sprintf("jdbc_src_%d", os.Getpid()), fmt.Sprintf("jdbc_dst_%d", os.Getpid())
			for _, s := range []string{"DROP TABLE IF EXISTS " + src, "DROP TABLE IF EXISTS " + dst,
				"CREATE TABLE " + src + " (region VARCHAR(20), amount BIGINT, price DOUBLE PRECISION)",
				"INSERT INTO " + src + " VALUES ('NORTH', 250, 1.5), ('WEST', 100, 2.0), ('NORTH', 175, 0.5), ('EAST', NULL, 1.0)"} {
				if _, err := db.Exec(s); err != nil {
					t.Fatalf("%s: %v", s, err)
				}
			}
			defer db.Exec("DROP TABLE IF EXISTS " + dst)
			defer db.Exec("DROP TABLE IF EXISTS " + src)
			conn := fmt.Sprintf("url: %q, username: %s, password: %q", tc.url, tc.user, tc.pass)
			pipeline := fmt.Sprintf(`pipeline:
  transforms:
    - type: %s
      name: Orders
      config: {%s, table: %s}
    - type: Combine
      name: Totals
      input: Orders
      config:
        group_by: [region]
        combine:
          total: {value: amount, fn: sum}
          spent: {value: price, fn: sum}
    - type: %s
      name: Write
      input: Totals
      config: {%s, table: %s, driver_class_name: unused.Driver}
    - type: ReadFromJdbc
      name: Big
      config: {%s, type: %s, query: "SELECT region, amount FROM %s WHERE amount > 150"}
    - type: LogForTesting
      input: Big
`, tc.read, conn, src, tc.write, conn, dst, conn, tc.typ, src)
			var logged strings.Builder
			p, err := Load("p.yaml", []byte(pipeline), Options{BaseDir: t.TempDir(), LogOutput: &logged})
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if _, err := weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: 2}); err != nil {
				t.Fatalf("run: %v", err)
			}
			rows, err := db.Query("SELECT region, total, spent FROM " + dst)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var got []string
			for rows.Next() {
				var region string
				var total sql.NullInt64
				var spent float64
				if err := rows.Scan(&region, &total, &spent); err != nil {
					t.Fatal(err)
				}
				got = append(got, fmt.Sprintf("%s %d %g", region, total.Int64, spent))
			}
			sort.Strings(got)
			want := "EAST 0 1\nNORTH 425 2\nWEST 100 2"
			if strings.Join(got, "\n") != want {
				t.Errorf("%s holds:\n%s\nwant:\n%s", dst, strings.Join(got, "\n"), want)
			}
			lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
			sort.Strings(lines)
			if len(lines) != 2 || !strings.Contains(lines[0], `"amount": 175`) || !strings.Contains(lines[1], `"amount": 250`) {
				t.Errorf("ReadFromJdbc's query gave:\n%s", logged.String())
			}
		})
	}
}

func TestJdbcTransformsRefused(t *testing.T) {
	base := "pipeline:\n  transforms:\n    - type: ReadFromPostgres\n      config: "
	for _, tt := range []struct{ config, want string }{
		{"{table: t}\n", `ReadFromPostgres config needs "url"`},
		{"{url: \"postgresql://x/y\", table: t}\n", "not a JDBC URL"},
		{"{url: \"jdbc:mysql://x/y\", table: t}\n", "type postgres does not match the url's mysql"},
		{"{url: \"jdbc:postgresql://127.0.0.1/y\"}\n", "needs config.table or config.query"},
		{"{url: \"jdbc:postgresql://127.0.0.1/y\", table: t, query: q}\n", "not both"},
		{"{url: \"jdbc:postgresql://127.0.0.1/y\", table: t, write_statement: x}\n", "write_statement"},
	} {
		loadErr(t, base+tt.config, tt.want)
	}
}

// TestJdbcHostPolicy: a server's pipeline may connect only to the hosts
// it allows, before any connection is made.
func TestJdbcHostPolicy(t *testing.T) {
	dir := t.TempDir()
	access, err := NewAccess([]string{dir}, nil, nil) // loopback only
	if err != nil {
		t.Fatal(err)
	}
	src := "pipeline:\n  transforms:\n    - type: ReadFromMySql\n      config: {url: \"jdbc:mysql://db.elsewhere:3306/shop\", table: orders}\n"
	_, err = Load("p.yaml", []byte(src), Options{BaseDir: dir, Access: access})
	if err == nil || !strings.Contains(err.Error(), `database host "db.elsewhere" is not one this server lets pipelines connect to`) || !strings.HasPrefix(err.Error(), "p.yaml:4:") {
		t.Errorf("err = %v, want the host refused at the url's position", err)
	}
}
