package pubsubrest_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/io/pubsub/pubsubgrpc"
	"github.com/weir-dev/weir/io/pubsub/pubsubrest"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// restServer is the REST surface over a real embedded broker, mounted in
// front of a handler that answers 418 for every other path (weir's API).
func restServer(t *testing.T) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	b, err := pubsub.StartEmbedded(ctx, pubsub.Options{StoreDir: t.TempDir(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	g := pubsubgrpc.New(b, pubsubgrpc.Options{Logger: quiet(), PullWait: time.Second})
	other := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	ts := httptest.NewServer(pubsubrest.Mount(other, pubsubrest.New(g, quiet())))
	t.Cleanup(func() {
		ts.Close()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		g.Stop(sctx)
		_ = b.Shutdown(sctx)
	})
	return ts
}

// call sends method path with body (JSON, or nothing) and decodes the
// JSON answer into a map; it returns the HTTP status too.
func call(t *testing.T, ts *httptest.Server, method, path, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewBufferString(body)
	}
	req, err := http.NewRequest(method, ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(raw) > 0 && resp.StatusCode != http.StatusTeapot {
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode, m
}

// TestRESTPublishPullAcknowledge: Pub/Sub's v1 REST calls through
// net/http, as curl users send them: create a topic and a subscription
// (PUT), publish (data in base64), pull, acknowledge, describe, list,
// delete; errors in Google's JSON shape; other paths left to weir's API.
func TestRESTPublishPullAcknowledge(t *testing.T) {
	ts := restServer(t)
	const p = "/v1/projects/my-project"
	if code, m := call(t, ts, "PUT", p+"/topics/orders.eu", `{"labels": {"team": "pay"}}`); code != 200 || m["name"] != "projects/my-project/topics/orders.eu" {
		t.Fatalf("create topic: %d %v", code, m)
	}
	if code, m := call(t, ts, "PUT", p+"/subscriptions/audit", `{"topic": "projects/my-project/topics/orders.eu", "ackDeadlineSeconds": 30}`); code != 200 || m["ackDeadlineSeconds"] != float64(30) {
		t.Fatalf("create subscription: %d %v", code, m)
	}
	data := base64.StdEncoding.EncodeToString([]byte(`{"amount": 42}`))
	code, m := call(t, ts, "POST", p+"/topics/orders.eu:publish", `{"messages": [{"data": "`+data+`", "attributes": {"region": "eu"}}, {"attributes": {"only": "attrs"}}]}`)
	if ids, _ := m["messageIds"].([]any); code != 200 || len(ids) != 2 {
		t.Fatalf("publish: %d %v", code, m)
	}
	code, m = call(t, ts, "POST", p+"/subscriptions/audit:pull", `{"maxMessages": 10}`)
	msgs, _ := m["receivedMessages"].([]any)
	if code != 200 || len(msgs) != 2 {
		t.Fatalf("pull: %d %v", code, m)
	}
	first := msgs[0].(map[string]any)
	msg := first["message"].(map[string]any)
	if msg["data"] != data || msg["attributes"].(map[string]any)["region"] != "eu" || msg["messageId"] != "1" {
		t.Fatalf("pulled message: %v", msg)
	}
	ids := []string{first["ackId"].(string), msgs[1].(map[string]any)["ackId"].(string)}
	ackBody, _ := json.Marshal(map[string]any{"ackIds": ids})
	if code, m := call(t, ts, "POST", p+"/subscriptions/audit:acknowledge", string(ackBody)); code != 200 || len(m) != 0 {
		t.Fatalf("acknowledge: %d %v", code, m)
	}
	if code, m := call(t, ts, "POST", p+"/subscriptions/audit:pull", `{"maxMessages": 10, "returnImmediately": true}`); code != 200 || m["receivedMessages"] != nil {
		t.Fatalf("pull after the acknowledgement: %d %v", code, m)
	}
	if code, m := call(t, ts, "GET", p+"/topics/orders.eu", ""); code != 200 || m["labels"].(map[string]any)["team"] != "pay" {
		t.Fatalf("get topic: %d %v", code, m)
	}
	if code, m := call(t, ts, "GET", p+"/topics/orders.eu/subscriptions", ""); code != 200 || len(m["subscriptions"].([]any)) != 1 {
		t.Fatalf("list topic subscriptions: %d %v", code, m)
	}
	if code, m := call(t, ts, "PATCH", p+"/subscriptions/audit", `{"subscription": {"ackDeadlineSeconds": 60}, "updateMask": "ackDeadlineSeconds"}`); code != 200 || m["ackDeadlineSeconds"] != float64(60) {
		t.Fatalf("patch subscription: %d %v", code, m)
	}
	// Errors: Google's JSON shape and HTTP codes.
	code, m = call(t, ts, "GET", p+"/topics/missing", "")
	e, _ := m["error"].(map[string]any)
	if code != 404 || e["status"] != "NOT_FOUND" || e["code"] != float64(404) {
		t.Fatalf("missing topic: %d %v", code, m)
	}
	if code, m := call(t, ts, "PUT", p+"/topics/orders.eu", ""); code != 409 || m["error"].(map[string]any)["status"] != "ALREADY_EXISTS" {
		t.Fatalf("topic created twice: %d %v", code, m)
	}
	if code, m := call(t, ts, "POST", p+"/topics/orders.eu:publish", `{"messages": [{"data": "not base64!"}]}`); code != 400 {
		t.Fatalf("bad base64: %d %v", code, m)
	}
	if code, m := call(t, ts, "POST", p+"/topics/orders.eu:frobnicate", `{}`); code != 404 {
		t.Fatalf("unknown method: %d %v", code, m)
	}
	if code, _ := call(t, ts, "GET", "/v1/jobs", ""); code != http.StatusTeapot {
		t.Fatalf("weir's own route: %d, want it left to the next handler", code)
	}
	if code, m := call(t, ts, "DELETE", p+"/subscriptions/audit", ""); code != 200 || len(m) != 0 {
		t.Fatalf("delete subscription: %d %v", code, m)
	}
	if code, m := call(t, ts, "DELETE", p+"/topics/orders.eu", ""); code != 200 {
		t.Fatalf("delete topic: %d %v", code, m)
	}
}
