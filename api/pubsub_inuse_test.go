package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/errcode"
)

// inUseYAML reads subscription in-sub and writes topic out; inTopicYAML
// reads topic in through its own subscription.
const inUseYAML = `pipeline:
  transforms:
    - type: ReadFromPubSub
      name: Orders
      config: {subscription: in-sub, schema: {key: string}}
    - type: WriteToPubSub
      name: Out
      input: Orders
      config: {topic: out}
`

// TestAPIPubSubInUse: deleting a topic or subscription that an active job
// uses, or pulling with acknowledgement from a job's subscription, is
// refused with the job named, the job untouched; --force (force=true)
// overrides it, and once the job ended the same requests succeed.
func TestAPIPubSubInUse(t *testing.T) {
	ts, c := newPubSubServer(t)
	ctx := context.Background()
	for _, tp := range []string{"in", "out", "spare"} {
		if _, err := c.CreateTopic(ctx, CreateTopicRequest{Name: tp}); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range []struct{ name, topic string }{{"in-sub", "in"}, {"in-free", "in"}} {
		if _, err := c.CreateSubscription(ctx, CreateSubscriptionRequest{Name: sub.name, Topic: sub.topic}); err != nil {
			t.Fatal(err)
		}
	}
	job, err := c.Submit(ctx, SubmitRequest{Name: "copier", Pipeline: inUseYAML, BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c, job.ID, client.StateRunning)

	steps := []struct {
		name, method, path, body string
		status                   int
		code                     errcode.Code
		contains                 []string
	}{
		{"delete the job's subscription", "DELETE", "/v1/subscriptions/in-sub", "", 409, errcode.SubscriptionInUse, []string{"copier", job.ID, `step \"Orders\"`, "--force"}},
		{"delete the job's output topic", "DELETE", "/v1/topics/out", "", 409, errcode.TopicInUse, []string{"copier", "writes topic out"}},
		{"delete the topic of the job's subscription", "DELETE", "/v1/topics/in", "", 409, errcode.TopicInUse, []string{"reads subscription in-sub"}},
		{"pull with ack from the job's subscription", "POST", "/v1/subscriptions/in-sub:pull", `{"ack": true}`, 409, errcode.SubscriptionInUse, []string{"without --auto-ack", "--auto-ack --force"}},
		{"pull without ack from the job's subscription", "POST", "/v1/subscriptions/in-sub:pull", `{}`, 200, "", nil},
		{"delete a subscription no job reads", "DELETE", "/v1/subscriptions/in-free", "", 204, "", nil},
		{"delete a topic no job uses", "DELETE", "/v1/topics/spare", "", 204, "", nil},
		{"force, bad value", "DELETE", "/v1/topics/out?force=yes", "", 400, errcode.InvalidRequest, []string{"force"}},
	}
	run := func(t *testing.T, method, path, reqBody string, status int, code errcode.Code, contains []string) {
		t.Helper()
		req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(reqBody))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		got := string(b)
		if resp.StatusCode != status {
			t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, status, got)
		}
		if code != "" && !strings.Contains(got, `"code": "`+string(code)+`"`) {
			t.Errorf("%s %s: want code %s in %s", method, path, code, got)
		}
		for _, w := range contains {
			if !strings.Contains(got, w) {
				t.Errorf("%s %s: want %q in %s", method, path, w, got)
			}
		}
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) { run(t, st.method, st.path, st.body, st.status, st.code, st.contains) })
	}
	if j, err := c.Get(ctx, job.ID); err != nil || j.State != client.StateRunning {
		t.Fatalf("after the refusals the job is %v (%v), want RUNNING", j.State, err)
	}
	// The client's Force option overrides the refusal.
	var apiErr *Error
	if err := c.DeleteTopic(ctx, "out"); !errors.As(err, &apiErr) || apiErr.Code != errcode.TopicInUse {
		t.Fatalf("client delete without Force: %v, want %s", err, errcode.TopicInUse)
	}
	if _, err := c.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, job.ID, client.StateCancelled)
	if err := c.DeleteSubscription(ctx, "in-sub"); err != nil {
		t.Fatalf("delete after the job ended: %v", err)
	}
	if err := c.DeleteTopic(ctx, "in", Force()); err != nil {
		t.Fatalf("delete with Force: %v", err)
	}
}
