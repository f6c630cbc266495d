package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// RetainedQuery selects a stretch of a topic's retained messages (GET
// /v1/topics/{name}/messages): from stream sequence After+1 when After is
// set, else from the first message published at or after Since (the
// oldest retained when zero), up to the last one published before Until
// (the newest when zero), at most Limit (default and most MaxPull).
type RetainedQuery struct {
	Since time.Time
	Until time.Time
	After uint64
	Limit int
}

// RetainedMessages is a page of a topic's retained messages, read without
// a subscription (nothing is delivered or acknowledged).
type RetainedMessages struct {
	Messages []PulledMessage `json:"messages"`
	// Next is the stream sequence to continue from (the After of the next
	// query is Next-1).
	Next uint64 `json:"next_sequence"`
	// Done says the stretch is read.
	Done bool `json:"done"`
}

// ReadRetained returns a page of the messages topic retains, as q selects
// them; it changes nothing on the server.
func (c *Client) ReadRetained(ctx context.Context, topic string, q RetainedQuery) (*RetainedMessages, error) {
	v := url.Values{}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.UTC().Format(time.RFC3339Nano))
	}
	if q.After > 0 {
		v.Set("after", strconv.FormatUint(q.After, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	path := "/v1/topics/" + url.PathEscape(topic) + "/messages"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out RetainedMessages
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
