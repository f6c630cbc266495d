package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/weir-dev/weir/service/record"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir/service"
)

// sseKeepAlive is how often a follow stream without events sends a comment
// line, so proxies keep it open.
const sseKeepAlive = 15 * time.Second

func (s *Server) registerEvents() {
	s.handleFunc("GET /v1/jobs/{ref}/events", s.events)
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
		if err != nil || n < 1 || n > record.MaxEventsPerJob {
			s.writeError(w, service.NewError(errcode.InvalidRequest, "limit=%q must be an integer between 1 and %d", v, record.MaxEventsPerJob))
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
		writeJSON(w, http.StatusOK, EventList{JobID: j.ID, Events: wireSlice(evs, wireEvent)})
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
	err = s.svc.FollowEvents(ctx, j.ID, after, func(evs []record.Event) error {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range evs {
			b, err := json.Marshal(wireEvent(ev))
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
