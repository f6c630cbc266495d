package server

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/api"
	"github.com/weir-dev/weir/errcode"
)

// TestRequestTooLarge: a body over api.MaxRequestBytes is refused 413,
// whether its length is announced or it comes chunked.
func TestRequestTooLarge(t *testing.T) {
	p := openServing(t, Config{Listen: "127.0.0.1:0"})
	big := `{"name": "x", "pipeline": "` + strings.Repeat("a", api.MaxRequestBytes) + `", "base_dir": "/"}`
	for name, body := range map[string]io.Reader{
		"content length": strings.NewReader(big),
		"chunked":        io.MultiReader(strings.NewReader(big)),
	} {
		req, err := http.NewRequest("POST", p.Address()+"/v1/jobs", body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 || !bytes.Contains(b, []byte(errcode.RequestTooLarge)) {
			t.Errorf("%s: %d %s, want 413 REQUEST_TOO_LARGE", name, resp.StatusCode, b)
		}
	}
}

// TestBodyTrickleCut: a body that stops arriving is cut off at the body
// read timeout: the server answers and closes the connection instead of
// waiting for the rest.
func TestBodyTrickleCut(t *testing.T) {
	const timeout = 200 * time.Millisecond
	p := openServing(t, Config{Listen: "127.0.0.1:0", BodyReadTimeout: timeout})
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.Address(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	// 1,000 bytes announced, 2 sent: a client trickling its body (or gone).
	if _, err := io.WriteString(conn, "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\""); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no reply to a stalled body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body) // the server closes the connection after it
	resp.Body.Close()
	elapsed := time.Since(start)
	if resp.StatusCode != 400 || !bytes.Contains(b, []byte("body read timeout")) {
		t.Errorf("stalled body: %d %s, want 400 naming the body read timeout", resp.StatusCode, b)
	}
	if elapsed < timeout || elapsed > 10*time.Second {
		t.Errorf("stalled body cut after %s, want about %s", elapsed, timeout)
	}
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Error("the connection is still open after the cut body")
	}
	// The timeout bounds bodies only: a normal request still works.
	if r := call(t, "GET", p.Address()+"/v1/jobs", ""); r.status != 200 {
		t.Errorf("after the cut: %d %s", r.status, r.body)
	}
}

const streamingYAML = `pipeline:
  transforms:
    - type: Generate
      name: Events
      config: {rate: 20, keys: 3, spacing: 100ms}
`

// TestObjectLimits: past --max-jobs active jobs, --max-topics topics or
// --max-subscriptions subscriptions a creation is refused 409
// LIMIT_EXCEEDED, and deleting one makes room.
func TestObjectLimits(t *testing.T) {
	p := openServing(t, Config{Listen: "127.0.0.1:0", MaxJobs: 1, MaxTopics: 2, MaxSubscriptions: 1})
	url := p.Address()
	post := func(path, body string) reply {
		return call(t, "POST", url+path, body, "Content-Type", "application/json")
	}
	job := func(name string) string {
		return `{"name": "` + name + `", "pipeline": ` + jsonString(streamingYAML) + `, "base_dir": "/tmp"}`
	}
	if r := post("/v1/jobs", job("one")); r.status != 201 {
		t.Fatalf("first job: %d %s", r.status, r.body)
	}
	if r := post("/v1/jobs", job("two")); r.status != 409 || r.code != errcode.LimitExceeded || !strings.Contains(r.body, "--max-jobs 1") {
		t.Errorf("second job: %d %s, want 409 LIMIT_EXCEEDED naming --max-jobs", r.status, r.body)
	}
	for _, name := range []string{"a", "b"} {
		if r := post("/v1/topics", `{"name": "`+name+`"}`); r.status != 201 {
			t.Fatalf("topic %s: %d %s", name, r.status, r.body)
		}
	}
	if r := post("/v1/topics", `{"name": "c"}`); r.status != 409 || r.code != errcode.LimitExceeded || !strings.Contains(r.body, "--max-topics 2") {
		t.Errorf("third topic: %d %s", r.status, r.body)
	}
	if r := call(t, "DELETE", url+"/v1/topics/b", "", "Content-Type", "application/json"); r.status != 204 {
		t.Fatalf("deleting b: %d %s", r.status, r.body)
	}
	if r := post("/v1/topics", `{"name": "c"}`); r.status != 201 {
		t.Errorf("a topic after a deletion: %d %s", r.status, r.body)
	}
	if r := post("/v1/subscriptions", `{"name": "s1", "topic": "a"}`); r.status != 201 {
		t.Fatalf("subscription: %d %s", r.status, r.body)
	}
	if r := post("/v1/subscriptions", `{"name": "s2", "topic": "a"}`); r.status != 409 || r.code != errcode.LimitExceeded || !strings.Contains(r.body, "--max-subscriptions 1") {
		t.Errorf("second subscription: %d %s", r.status, r.body)
	}
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// TestDeepYAMLRefused: the 100 KB pipeline nested 50,000 levels deep that
// drove the server past 5 GiB is refused 400 INVALID_PIPELINE, naming the
// limit, before the YAML parser builds anything.
func TestDeepYAMLRefused(t *testing.T) {
	p := openServing(t, Config{Listen: "127.0.0.1:0"})
	deep := "pipeline: " + strings.Repeat("[", 50_000) + strings.Repeat("]", 50_000) + "\n"
	body := `{"name": "deep", "pipeline": ` + jsonString(deep) + `, "base_dir": "/tmp"}`
	r := call(t, "POST", p.Address()+"/v1/jobs", body, "Content-Type", "application/json")
	if r.status != 400 || r.code != errcode.InvalidPipeline || !strings.Contains(r.body, "nested more than") {
		t.Errorf("deep YAML: %d %.300s, want 400 INVALID_PIPELINE naming the nesting limit", r.status, r.body)
	}
}
