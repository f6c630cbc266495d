package yamlpipe

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// icebergCatalog is a catalog config of a SQLite catalog and a warehouse
// in dir, as Beam YAML writes it.
func icebergCatalog(dir string) string {
	return fmt.Sprintf("catalog_name: local, catalog_properties: {type: sql, uri: \"sqlite:///%s\", warehouse: \"file://%s\"}",
		filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
}

// TestIcebergRoundTrip writes rows from ReadFromCsv and Create with
// WriteToIceberg (creating the table, then appending), and reads them
// back with ReadFromIceberg: every column and its type survive, and keep
// selects columns.
func TestIcebergRoundTrip(t *testing.T) {
	dir := t.TempDir()
	cat := icebergCatalog(dir)
	if err := os.WriteFile(filepath.Join(dir, "in.csv"), []byte("id,name,score,ok\n1,ann,1.5,true\n2,bob,2.25,false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runLogged(t, fmt.Sprintf(`pipeline:
  transforms:
    - type: ReadFromCsv
      name: Csv
      config: {path: %q}
    - type: MapToFields
      name: Stamp
      input: Csv
      config:
        language: cel
        append: true
        fields:
          at: timestamp("2024-05-01T10:00:00Z") + duration(string(id) + "s")
    - type: WriteToIceberg
      input: Stamp
      config: {table: db.people, %s, partition_fields: ["day(at)"], triggering_frequency_seconds: 60}
`, filepath.Join(dir, "in.csv"), cat), 2)
	runLogged(t, fmt.Sprintf(`pipeline:
  transforms:
    - type: Create
      config:
        elements: [{id: 3, name: cy, score: 3.0, ok: true, extra: dropped}]
    - type: WriteToIceberg
      input: Create
      config: {table: db.people, %s, drop: [extra]}
`, cat), 1)
	got, _ := runLogged(t, fmt.Sprintf(`pipeline:
  transforms:
    - type: ReadFromIceberg
      config: {table: db.people, %s}
    - type: LogForTesting
      input: ReadFromIceberg
    - type: ReadFromIceberg
      name: Names
      config: {table: db.people, %s, keep: [name]}
    - type: LogForTesting
      input: Names
`, cat, cat), 2)
	wantLines(t, got,
		`{"id": 1, "name": "ann", "score": 1.5, "ok": true, "at": "2024-05-01T10:00:01.000Z"}`,
		`{"id": 2, "name": "bob", "score": 2.25, "ok": false, "at": "2024-05-01T10:00:02.000Z"}`,
		`{"id": 3, "name": "cy", "score": 3.0, "ok": true, "at": null}`,
		`{"name": "ann"}`, `{"name": "bob"}`, `{"name": "cy"}`)
}

// TestIcebergRefused: configs weir cannot honour are refused at load,
// at the position of what is wrong.
func TestIcebergRefused(t *testing.T) {
	dir := t.TempDir()
	cat := icebergCatalog(dir)
	read := "pipeline:\n  transforms:\n    - type: ReadFromIceberg\n      config: "
	write := "pipeline:\n  transforms:\n    - type: Create\n      config: {elements: [{a: 1}]}\n    - type: WriteToIceberg\n      input: Create\n      config: "
	for _, tt := range []struct{ src, want string }{
		{read + "{" + cat + "}\n", `p.yaml:4:15: ReadFromIceberg config needs "table"`},
		{read + "{table: db.t}\n", "p.yaml:3:13: ReadFromIceberg needs config.catalog_properties"},
		{read + "{table: t, " + cat + "}\n", "p.yaml:4:23: ReadFromIceberg table: invalid Iceberg configuration: table \"t\": give it with its namespace"},
		{read + "{table: db.t, " + cat + ", snapshot_id: 3}\n", `unknown key "snapshot_id"`},
		{read + "{table: db.t, catalog_properties: {type: rest, uri: \"http://x\"}}\n", "catalog type \"rest\": weir has the sql (jdbc) catalog, in SQLite or PostgreSQL, and the hadoop catalog"},
		{read + "{table: db.t, catalog_properties: {type: hadoop}}\n", "p.yaml:4:49: ReadFromIceberg catalog_properties: invalid Iceberg configuration: a hadoop catalog needs warehouse"},
		{read + "{table: db.t, catalog_properties: {type: sql, uri: c.db, io-impl: x}}\n", `p.yaml:4:72: unknown key "io-impl" in ReadFromIceberg catalog_properties`},
		{read + "{table: db.t, catalog_properties: {type: sql, uri: c.db, warehouse: \"s3://b/w\"}}\n", "s3:// warehouses are not supported"},
		{read + "{table: db.t, catalog_properties: {type: sql, uri: c.db}, config_properties: {fs.x: y}}\n", "config_properties are Hadoop settings"},
		{read + "{table: db.t, " + cat + ", filter: \"id >\"}\n", `ReadFromIceberg: filter "id >" at character 5: want a literal`},
		{read + "{table: db.missing, " + cat + "}\n", "table db.missing is not in catalog local"},
		{write + "{table: db.t, " + cat + ", only: rec}\n", "WriteToIceberg only (writing one nested record field) is not supported"},
		{write + "{table: db.t, " + cat + ", partition_fields: [\"week(a)\"]}\n", `partition field "week(a)"`},
		{write + "{table: db.t, " + cat + ", triggering_frequency_seconds: 0}\n", "triggering_frequency_seconds must be positive"},
		{write + "{table: db.t, " + cat + ", keep: [nosuch]}\n", `the rows have no field "nosuch"`},
	} {
		_, err := Load("p.yaml", []byte(tt.src), Options{BaseDir: dir})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "p.yaml:") {
			t.Errorf("%s\nerr = %v, want a positioned error containing %q", tt.src, err, tt.want)
		}
	}
}

// TestIcebergFilePolicy: a server's pipeline keeps its catalog file and
// warehouse (a hadoop catalog's too) inside the file roots, and its PostgreSQL catalog on an
// allowed host, before anything is opened.
func TestIcebergFilePolicy(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	access, err := NewAccess([]string{dir}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	read := "pipeline:\n  transforms:\n    - type: ReadFromIceberg\n      config:\n        table: db.t\n        catalog_properties:\n"
	for _, tt := range []struct{ props, want string }{
		{"          type: sql\n          uri: \"sqlite:///" + outside + "/c.db\"\n", "p.yaml:8:16: ReadFromIceberg catalog uri"},
		{"          type: sql\n          uri: c.db\n          warehouse: \"file://" + outside + "\"\n", "p.yaml:9:22: ReadFromIceberg catalog warehouse"},
		{"          type: hadoop\n          warehouse: \"" + outside + "/wh\"\n", "p.yaml:8:22: ReadFromIceberg catalog warehouse"},
		{"          type: sql\n          uri: \"postgresql://db.elsewhere/cat\"\n", `p.yaml:8:16: ReadFromIceberg catalog uri: database host "db.elsewhere" is not one this server lets pipelines connect to`},
	} {
		_, err := Load("p.yaml", []byte(read+tt.props), Options{BaseDir: dir, Access: access})
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("err = %v, want it to start %q", err, tt.want)
		}
		if strings.Contains(tt.want, "catalog uri:") || strings.Contains(tt.want, "warehouse") {
			if !errors.Is(err, ErrPathNotAllowed) && !errors.Is(err, ErrSQLHostNotAllowed) {
				t.Errorf("err = %v, want ErrPathNotAllowed or ErrSQLHostNotAllowed", err)
			}
		}
	}
}
