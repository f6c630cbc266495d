package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// CreateSnapshotRequest is the body of POST /v1/snapshots (JobID is taken
// from the path on POST /v1/jobs/{ref}:snapshot). TTL is a weir duration
// ("7d", "36h"), 1h to 30d, default 7d.
type CreateSnapshotRequest struct {
	JobID           string `json:"job_id,omitempty"`
	TTL             string `json:"ttl,omitempty"`
	Description     string `json:"description,omitempty"`
	SnapshotSources bool   `json:"snapshot_sources,omitempty"`
}

// SnapshotList is the reply of GET /v1/snapshots.
type SnapshotList struct {
	Snapshots []*Snapshot `json:"snapshots"`
}

// FromSnapshotRequest is the body of POST /v1/jobs:createFromSnapshot: a
// new job that starts from a snapshot's state and positions.
type FromSnapshotRequest struct {
	SubmitRequest
	SnapshotID           string `json:"snapshot_id"`
	TransformNameMapping string `json:"transform_name_mapping,omitempty"`
	AllowSourceChange    bool   `json:"allow_source_change,omitempty"`
	// ValidateOnly runs every check and creates nothing.
	ValidateOnly bool `json:"validate_only,omitempty"`
	// SourcePositions says how Pub/Sub positions of another broker (an
	// imported snapshot file's) translate: "from-publish-time" (each
	// source starts after the last message published at or before its
	// position's publish time: the suggested choice), "earliest" or
	// "latest"; "" or "fail" refuses them (SNAPSHOT_FOREIGN_POSITIONS).
	// Positions of the server's own broker are used as they are.
	SourcePositions string `json:"source_positions,omitempty"`
}

// ImportChunkBytes is the most file bytes one import request carries
// (base64 in JSON: under MaxRequestBytes).
const ImportChunkBytes = 4 << 20

// ImportRequest is the body of POST /v1/snapshots:import: one chunk of a
// snapshot file, the first without UploadID, each at the offset of the
// bytes sent so far; the final one imports the whole file.
type ImportRequest struct {
	UploadID string `json:"upload_id,omitempty"`
	Offset   int64  `json:"offset"`
	// Data is the chunk (base64 in JSON).
	Data  []byte `json:"data"`
	Final bool   `json:"final,omitempty"`
	// TTL of the imported snapshot, counted from the import (final chunk).
	TTL string `json:"ttl,omitempty"`
}

// ImportResponse is the reply of POST /v1/snapshots:import.
type ImportResponse struct {
	UploadID string    `json:"upload_id"`
	Received int64     `json:"received_bytes"`
	Snapshot *Snapshot `json:"snapshot,omitempty"`
}

// CreateSubscriptionSnapshotRequest is the body of POST
// /v1/subscription-snapshots.
type CreateSubscriptionSnapshotRequest struct {
	Name         string `json:"name"`
	Subscription string `json:"subscription"`
}

// SubscriptionSnapshotList is the reply of GET /v1/subscription-snapshots.
type SubscriptionSnapshotList struct {
	Snapshots []SubscriptionSnapshot `json:"snapshots"`
}

// SeekRequest is the body of POST /v1/subscriptions/{name}:seek: a
// snapshot name or an RFC 3339 time.
type SeekRequest struct {
	Snapshot string `json:"snapshot,omitempty"`
	Time     string `json:"time,omitempty"`
	// Force seeks even a subscription a running or draining job reads.
	Force bool `json:"force,omitempty"`
}

// CreateSnapshot asks for a snapshot of job req.JobID; the reply is the
// snapshot as soon as its cut is taken (RUNNING, or FAILED).
func (c *Client) CreateSnapshot(ctx context.Context, req CreateSnapshotRequest) (*Snapshot, error) {
	var out Snapshot
	if err := c.do(ctx, http.MethodPost, "/v1/snapshots", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListSnapshots lists the snapshots of job ref (an ID or a name; "" for
// all), DELETED ones too with all.
func (c *Client) ListSnapshots(ctx context.Context, ref string, all bool) ([]*Snapshot, error) {
	q := url.Values{}
	if ref != "" {
		q.Set("job_id", ref)
	}
	if all {
		q.Set("all", "true")
	}
	path := "/v1/snapshots"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out SnapshotList
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return out.Snapshots, nil
}

// GetSnapshot returns snapshot id.
func (c *Client) GetSnapshot(ctx context.Context, id string) (*Snapshot, error) {
	var out Snapshot
	if err := c.do(ctx, http.MethodGet, "/v1/snapshots/"+url.PathEscape(id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSnapshot deletes snapshot id and returns its DELETED record.
func (c *Client) DeleteSnapshot(ctx context.Context, id string) (*Snapshot, error) {
	var out Snapshot
	if err := c.do(ctx, http.MethodDelete, "/v1/snapshots/"+url.PathEscape(id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WaitSnapshot polls snapshot id every interval until it is READY, FAILED
// or DELETED, calling progress (when set) with every state read.
func (c *Client) WaitSnapshot(ctx context.Context, id string, interval time.Duration, progress func(*Snapshot)) (*Snapshot, error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		snap, err := c.GetSnapshot(ctx, id)
		if err != nil {
			return nil, err
		}
		if progress != nil {
			progress(snap)
		}
		switch snap.State {
		case SnapshotReady, SnapshotFailed, SnapshotDeleted:
			return snap, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// CreateFromSnapshot creates job req.Name from snapshot req.SnapshotID. A
// refused compatibility check returns the report together with an *Error
// (code INCOMPATIBLE_UPDATE); nothing is then created.
func (c *Client) CreateFromSnapshot(ctx context.Context, req FromSnapshotRequest) (*UpdateResponse, error) {
	var out UpdateResponse
	replied, err := c.doWithReply(ctx, http.MethodPost, "/v1/jobs:createFromSnapshot", req, &out)
	if err != nil && !(replied && out.Error != nil) {
		return nil, err
	}
	return &out, err
}

// ExportSnapshot downloads snapshot id's file into w and returns its
// size. The transfer has no overall timeout (ctx bounds it): a file may
// be large. The caller verifies the file before trusting it; a transfer
// broken by the server is an error.
func (c *Client) ExportSnapshot(ctx context.Context, id string, w io.Writer) (int64, error) {
	path := "/v1/snapshots/" + url.PathEscape(id) + ":export"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return 0, fmt.Errorf("building the request: %w", err)
	}
	c.authorize(req)
	hc := &http.Client{Transport: c.http.Transport, CheckRedirect: c.http.CheckRedirect, Jar: c.http.Jar}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, c.transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return 0, replyError(http.MethodGet, path, resp.StatusCode, b)
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("downloading snapshot %s: the transfer broke after %d bytes: %w", id, n, err)
	}
	return n, nil
}

// ImportSnapshot uploads a snapshot file from r in chunks and returns the
// imported snapshot; ttl ("" for the default) counts from the import.
// progress, when set, is called after every chunk with the bytes sent.
func (c *Client) ImportSnapshot(ctx context.Context, r io.Reader, ttl string, progress func(sent int64)) (*Snapshot, error) {
	br := bufio.NewReaderSize(r, ImportChunkBytes)
	req := ImportRequest{TTL: ttl}
	buf := make([]byte, ImportChunkBytes)
	for {
		n, err := io.ReadFull(br, buf)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("reading the snapshot file: %w", err)
		}
		req.Data = buf[:n]
		if err != nil {
			req.Final = true
		} else if _, perr := br.Peek(1); perr != nil {
			req.Final = true
		}
		var out ImportResponse
		if err := c.do(ctx, http.MethodPost, "/v1/snapshots:import", req, &out); err != nil {
			return nil, err
		}
		if progress != nil {
			progress(out.Received)
		}
		if req.Final {
			if out.Snapshot == nil {
				return nil, errors.New("the server finished the upload without a snapshot")
			}
			return out.Snapshot, nil
		}
		req.UploadID, req.Offset = out.UploadID, out.Received
	}
}

// CreateSubscriptionSnapshot snapshots subscription req.Subscription as
// req.Name.
func (c *Client) CreateSubscriptionSnapshot(ctx context.Context, req CreateSubscriptionSnapshotRequest) (*SubscriptionSnapshot, error) {
	var out SubscriptionSnapshot
	if err := c.do(ctx, http.MethodPost, "/v1/subscription-snapshots", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListSubscriptionSnapshots lists the subscription snapshots of topic, or
// of every topic when topic is "", by name.
func (c *Client) ListSubscriptionSnapshots(ctx context.Context, topic string) ([]SubscriptionSnapshot, error) {
	path := "/v1/subscription-snapshots"
	if topic != "" {
		path += "?topic=" + url.QueryEscape(topic)
	}
	var out SubscriptionSnapshotList
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return out.Snapshots, nil
}

// GetSubscriptionSnapshot describes subscription snapshot name.
func (c *Client) GetSubscriptionSnapshot(ctx context.Context, name string) (*SubscriptionSnapshot, error) {
	var out SubscriptionSnapshot
	if err := c.do(ctx, http.MethodGet, "/v1/subscription-snapshots/"+url.PathEscape(name), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSubscriptionSnapshot deletes subscription snapshot name.
func (c *Client) DeleteSubscriptionSnapshot(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/subscription-snapshots/"+url.PathEscape(name), nil, nil)
}

// Seek sets subscription name's acknowledgement state to req's snapshot
// or time.
func (c *Client) Seek(ctx context.Context, name string, req SeekRequest) (*SeekResult, error) {
	var out SeekResult
	if err := c.do(ctx, http.MethodPost, "/v1/subscriptions/"+url.PathEscape(name)+":seek", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
