package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir/service"
)

// EventList is the answer of GET /v1/jobs/{id}/events: the job's events,
// oldest first.
type EventList struct {
	JobID  string          `json:"job_id"`
	Events []service.Event `json:"events"`
}

// DefaultEventLimit is how many events GET /v1/jobs/{id}/events returns
// without ?limit= (the job keeps at most service.MaxEventsPerJob).
const DefaultEventLimit = 1000

// sseKeepAlive is how often a follow stream without events sends a comment
// line, so proxies keep it open.
const sseKeepAlive = 15 * time.Second

func (s *Server) registerEvents() {
	s.mux.HandleFunc("GET /v1/jobs/{ref}/events", s.events)
}

// events serves GET /v1/jobs/{ref}/events[?after=SEQ][&limit=N][&follow=true].
// With follow, the answer is a stream of server-sent events: one
// "data: EVENT-JSON" message per event with "id: SEQ" (so an EventSource
// reconnects after the last one it saw, through Last-Event-ID), until the
// job is terminal (a last "event: end" message) or the server stops.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "after", "limit", "follow":
		default:
			s.writeError(w, service.NewError(errcode.InvalidRequest, "unknown query parameter %q (known: after, limit, follow)", k))
			return
		}
	}
	var after uint64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			s.writeError(w, service.NewError(errcode.InvalidRequest, "after=%q is not an event sequence number (a non-negative integer)", v))
			return
		}
		after = n
	} else if v := r.Header.Get("Last-Event-ID"); v != "" {
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			after = n
		}
	}
	limit := DefaultEventLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > service.MaxEventsPerJob {
			s.writeError(w, service.NewError(errcode.InvalidRequest, "limit=%q must be an integer between 1 and %d", v, service.MaxEventsPerJob))
			return
		}
		limit = n
	}
	follow := false
	if v := q.Get("follow"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.writeError(w, service.NewError(errcode.InvalidRequest, "follow=%q must be true or false", v))
			return
		}
		follow = b
	}
	if !follow {
		j, evs, err := s.svc.Events(r.PathValue("ref"), after, limit)
		if err != nil {
			s.writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, EventList{JobID: j.ID, Events: evs})
		return
	}
	j, err := s.svc.Get(r.PathValue("ref"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		s.writeError(w, service.NewError(errcode.Internal, "this connection cannot stream server-sent events"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": weir job events of "+j.ID+"\n\n")
	fl.Flush()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.streams, cancel)
	defer stop()
	// A keep-alive comment while nothing happens; it shares w with the
	// events, so both write under one lock.
	var mu sync.Mutex
	go func() {
		t := time.NewTicker(sseKeepAlive)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				mu.Lock()
				_, err := fmt.Fprint(w, ": keep-alive\n\n")
				if err == nil {
					fl.Flush()
				}
				mu.Unlock()
				if err != nil {
					cancel()
					return
				}
			}
		}
	}()
	err = s.svc.FollowEvents(ctx, j.ID, after, func(evs []service.Event) error {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range evs {
			b, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", ev.Seq, b); err != nil {
				return err
			}
		}
		fl.Flush()
		return nil
	})
	cancel()
	mu.Lock()
	defer mu.Unlock()
	if err == nil && s.streams.Err() == nil {
		fmt.Fprint(w, "event: end\ndata: {}\n\n")
		fl.Flush()
	}
}

// EndStreams ends every follow stream (GET /v1/jobs/{id}/events?follow=true)
// and makes new ones end at once: the process that serves the API calls it
// before it waits for in-flight requests (a shutdown, a release), which a
// stream would otherwise hold open.
func (s *Server) EndStreams() { s.endStreams() }

// Events returns the events of job ref after sequence number after, at
// most limit (0: the server's default).
func (c *Client) Events(ctx context.Context, ref string, after uint64, limit int) (*EventList, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatUint(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/v1/jobs/" + url.PathEscape(ref) + "/events"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out EventList
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// FollowEvents streams the events of job ref after sequence number after
// (GET /v1/jobs/{ref}/events?follow=true) and calls fn with each, until
// the job is terminal (nil), ctx ends, the server ends the stream (for a
// shutdown: ErrStreamEnded, after which a caller may follow again from the
// last sequence number it saw), or fn fails.
func (c *Client) FollowEvents(ctx context.Context, ref string, after uint64, fn func(service.Event) error) error {
	path := "/v1/jobs/" + url.PathEscape(ref) + "/events?follow=true"
	if after > 0 {
		path += "&after=" + strconv.FormatUint(after, 10)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	hc := *c.http
	hc.Timeout = 0 // a stream lasts as long as the job
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w at %s: %v", ErrUnreachable, c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return replyError(http.MethodGet, path, resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var event, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if event == "end" {
				return nil
			}
			if data != "" {
				var ev service.Event
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					return fmt.Errorf("decoding an event of job %s: %w", ref, err)
				}
				if err := fn(ev); err != nil {
					return err
				}
			}
			event, data = "", ""
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the events of job %s: %w", ref, err)
	}
	return ErrStreamEnded
}

// ErrStreamEnded says the server ended an event stream before the job
// ended (it shuts down or hands its data directory over).
var ErrStreamEnded = errors.New("the server ended the event stream")

// MetricsHistory returns the metrics history of job ref; query holds the
// parameters of GET /v1/jobs/{id}/metrics:history (from, to, step, metric,
// resolution), nil for the default (the last hour).
func (c *Client) MetricsHistory(ctx context.Context, ref string, query url.Values) (*service.History, error) {
	path := "/v1/jobs/" + url.PathEscape(ref) + "/metrics:history"
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	var out service.History
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
