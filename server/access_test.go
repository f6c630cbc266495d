package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/internal/await"
)

// TestPipelineAccess submits, over real HTTP, the pipelines of issue 11's
// attacks: each is refused at submission with its code, status and a
// message naming the path and the roots (or the host), and a pipeline
// that stays inside the roots still runs.
func TestPipelineAccess(t *testing.T) {
	root, outside, dataDir := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.jsonl"), []byte(`{"a": 1}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "notes.jsonl"), []byte("the user's own file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A database port that records whether anything connected to it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	p := openServing(t, Config{Listen: "127.0.0.1:0", DataDir: dataDir, FileRoots: []string{root, dataDir},
		AllowedSQLHosts: []string{"db.internal"}, GenerateAuthToken: true})
	c, err := client.NewClient(p.Address(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithToken(p.GeneratedToken())

	read := func(path string) string {
		return fmt.Sprintf(`pipeline:
  transforms:
    - type: ReadFromJson
      name: Read
      config: {path: %q, schema: {a: int}}
      error_handling: {output: bad}
    - type: WriteToPubSub
      name: Leak
      input: Read.bad
      config: {topic: leak}
    - type: WriteToJson
      name: Keep
      input: Read
      config: {path: kept.jsonl}
`, path)
	}
	write := func(path string) string {
		return fmt.Sprintf(`pipeline:
  transforms:
    - type: Create
      name: Rows
      config: {elements: [{a: 1}]}
    - type: WriteToJson
      name: Write
      input: Rows
      config: {path: %q}
`, path)
	}
	sqlSink := func(driver, dsn string) string {
		return fmt.Sprintf(`pipeline:
  transforms:
    - type: Create
      name: Rows
      config: {elements: [{a: 1}]}
    - type: WriteToSql
      name: Write
      input: Rows
      config: {driver: %s, dsn: %q, table: t, key: [a]}
`, driver, dsn)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	tests := []struct {
		name     string
		pipeline string
		code     errcode.Code
		status   int
		mentions []string
	}{
		{name: "reading /etc/passwd", pipeline: read("/etc/passwd"), code: errcode.PathNotAllowed, status: 400, mentions: []string{"/etc/passwd", root, "--file-roots"}},
		{name: "reading /proc/self/environ", pipeline: read("/proc/self/environ"), code: errcode.PathNotAllowed, status: 400, mentions: []string{"/proc/self/environ"}},
		{name: "a relative path climbing out", pipeline: read("../../../../../../etc/passwd"), code: errcode.PathNotAllowed, status: 400, mentions: []string{"/etc/passwd"}},
		{name: "an absolute path with ..", pipeline: write(root + "/../" + filepath.Base(outside) + "/x.jsonl"), code: errcode.PathNotAllowed, status: 400, mentions: []string{outside}},
		{name: "a link escaping the root", pipeline: read("link/secret.jsonl"), code: errcode.PathNotAllowed, status: 400, mentions: []string{"it leads to " + outside}},
		{name: "writing through a link", pipeline: write("link/new.jsonl"), code: errcode.PathNotAllowed, status: 400},
		{name: "reading the auth token", pipeline: read(filepath.Join(dataDir, AuthTokenFileName)), code: errcode.PathNotAllowed, status: 400, mentions: []string{"server's own files"}},
		{name: "writing into the state", pipeline: write(filepath.Join(dataDir, "state", "x.jsonl")), code: errcode.PathNotAllowed, status: 400},
		{name: "a SQLite file elsewhere", pipeline: sqlSink("sqlite", filepath.Join(outside, "app.db")), code: errcode.PathNotAllowed, status: 400},
		{name: "a SQLite file: URI elsewhere", pipeline: sqlSink("sqlite", "file:"+outside+"/app.db?_pragma=foreign_keys(1)"), code: errcode.PathNotAllowed, status: 400},
		{name: "a PostgreSQL host not allowed", pipeline: sqlSink("postgres", fmt.Sprintf("postgres://u@127.0.0.1:%d/db?connect_timeout=2", port)), code: errcode.SQLHostNotAllowed, status: 400, mentions: []string{"127.0.0.1", "db.internal", "--allowed-sql-hosts"}},
		{name: "overwriting a file weir did not create", pipeline: write("notes.jsonl"), code: errcode.OutputExists, status: 409, mentions: []string{"weir did not create"}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Submit(context.Background(), client.SubmitRequest{Name: fmt.Sprintf("attack-%d", i), Pipeline: tc.pipeline, PipelineFile: "attack.yaml", BaseDir: root})
			var ae *client.Error
			if !errors.As(err, &ae) || ae.Code != tc.code || ae.Status != tc.status {
				t.Fatalf("submit = %v, want %d %s", err, tc.status, tc.code)
			}
			for _, m := range tc.mentions {
				if !strings.Contains(ae.Message, m) {
					t.Errorf("message %q does not mention %q", ae.Message, m)
				}
			}
		})
	}
	select {
	case <-accepted:
		t.Error("the server connected to a refused database host")
	default:
	}
	if b, _ := os.ReadFile(filepath.Join(root, "notes.jsonl")); string(b) != "the user's own file\n" {
		t.Errorf("the user's file was changed: %q", b)
	}

	// Inside the roots, a pipeline runs as before.
	if err := os.WriteFile(filepath.Join(root, "in.jsonl"), []byte(`{"a": 7}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := c.Submit(context.Background(), client.SubmitRequest{Name: "inside", Pipeline: strings.Replace(read("in.jsonl"), "kept.jsonl", "out/kept.jsonl", 1), PipelineFile: "inside.yaml", BaseDir: root})
	if err != nil {
		t.Fatal(err)
	}
	var j *client.Job
	if !await.Until(30*time.Second, 5*time.Millisecond, func() bool {
		j, err = c.Get(context.Background(), res.ID)
		return err == nil && j.State.Terminal()
	}) {
		t.Fatalf("the job did not end: %v %v", j, err)
	}
	if j.State != client.StateDone {
		t.Fatalf("job %s: %s (%s)", j.Name, j.State, j.Error)
	}
	b, err := os.ReadFile(filepath.Join(root, "out", "kept.jsonl"))
	if err != nil || strings.TrimSpace(string(b)) != `{"a":7}` {
		t.Errorf("output %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(root, "out", "kept.jsonl")); err != nil || fi.Mode().Perm()&0o037 != 0 {
		t.Errorf("sink file mode: %v %v, want no more than 0640", fi.Mode(), err)
	}
}
