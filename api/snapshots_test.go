package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/errcode"
)

// TestSnapshotRoutes: create (both routes), describe, list, delete, and
// the codes of refusals, through the client.
func TestSnapshotRoutes(t *testing.T) {
	ts, c := newTestServer(t)
	ctx := context.Background()
	sub, err := c.Submit(ctx, SubmitRequest{Name: "sums", Pipeline: streamingYAML, BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := c.CreateSnapshot(ctx, CreateSnapshotRequest{JobID: "sums", TTL: "36h", Description: "d"})
	if err != nil {
		t.Fatal(err)
	}
	if snap.SourceJobID != sub.ID || snap.TTL != "36h" || snap.Description != "d" {
		t.Fatalf("snapshot: %+v", snap)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	ready, err := c.WaitSnapshot(wctx, snap.ID, 10*time.Millisecond, nil)
	if err != nil || ready.State != client.SnapshotReady || ready.DiskSizeBytes <= 0 {
		t.Fatalf("wait: %+v %v", ready, err)
	}
	resp, err := http.Post(ts.URL+"/v1/jobs/sums:snapshot", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/jobs/sums:snapshot: %d", resp.StatusCode)
	}
	list, err := c.ListSnapshots(ctx, "sums", false)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %v %v", list, err)
	}
	del, err := c.DeleteSnapshot(ctx, snap.ID)
	if err != nil || del.State != client.SnapshotDeleted {
		t.Fatalf("delete: %+v %v", del, err)
	}
	if got, err := c.GetSnapshot(ctx, snap.ID); err != nil || got.State != client.SnapshotDeleted {
		t.Fatalf("describe a deleted snapshot: %+v %v", got, err)
	}
	if list, _ := c.ListSnapshots(ctx, sub.ID, false); len(list) != 1 {
		t.Fatalf("list without all: %v", list)
	}
	if list, _ := c.ListSnapshots(ctx, sub.ID, true); len(list) != 2 {
		t.Fatalf("list with all: %v", list)
	}
	for _, tc := range []struct {
		call   func() error
		code   errcode.Code
		status int
	}{
		{func() error {
			_, err := c.CreateSnapshot(ctx, CreateSnapshotRequest{JobID: "sums", TTL: "10m"})
			return err
		}, errcode.InvalidTTL, 400},
		{func() error {
			_, err := c.CreateSnapshot(ctx, CreateSnapshotRequest{JobID: "sums", TTL: "7"})
			return err
		}, errcode.InvalidTTL, 400},
		{func() error { _, err := c.CreateSnapshot(ctx, CreateSnapshotRequest{JobID: "nope"}); return err }, errcode.JobNotFound, 404},
		{func() error { _, err := c.GetSnapshot(ctx, "no-such"); return err }, errcode.SnapshotNotFound, 404},
		{func() error { _, err := c.DeleteSnapshot(ctx, "no-such"); return err }, errcode.SnapshotNotFound, 404},
		{func() error {
			_, err := c.CreateFromSnapshot(ctx, FromSnapshotRequest{SubmitRequest: SubmitRequest{Name: "v2", Pipeline: streamingYAML, BaseDir: "/"}, SnapshotID: snap.ID})
			return err
		}, errcode.SnapshotCorrupt, 400},
	} {
		err := tc.call()
		var e *Error
		if !errors.As(err, &e) || e.Code != tc.code || e.Status != tc.status {
			t.Errorf("%v, want %s %d", err, tc.code, tc.status)
		}
	}
	if _, err := c.Cancel(ctx, "sums"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSnapshot(ctx, CreateSnapshotRequest{JobID: sub.ID}); err == nil || !strings.Contains(err.Error(), "RUNNING") {
		t.Errorf("snapshot of a cancelled job: %v", err)
	}
}
