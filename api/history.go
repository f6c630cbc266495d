package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir/service"
)

func (s *Server) registerHistory() {
	s.handleFunc("GET /v1/jobs/{ref}/metrics:history", s.metricsHistory)
}

// metricsHistory serves GET /v1/jobs/{ref}/metrics:history
// ?from=&to=&step=&metric=&resolution=: the job's metrics history,
// {series: [{step, metric, points: [[unix_ms, value]]}]} (see
// service.MetricsHistory). from and to are Unix milliseconds or RFC 3339
// times; resolution is 5s, 1m or auto (the default).
func (s *Server) metricsHistory(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var hq service.HistoryQuery
	for k := range q {
		switch k {
		case "from", "to", "step", "metric", "resolution":
		default:
			s.writeError(w, service.NewError(errcode.InvalidRequest, "unknown query parameter %q (known: from, to, step, metric, resolution)", k))
			return
		}
	}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"from", &hq.From}, {"to", &hq.To}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		t, err := parseHistoryTime(v)
		if err != nil {
			s.writeError(w, service.NewError(errcode.InvalidRequest, "%s=%q is neither Unix milliseconds nor an RFC 3339 time", p.name, v))
			return
		}
		*p.dst = t
	}
	hq.Step, hq.Metric = q.Get("step"), q.Get("metric")
	switch v := q.Get("resolution"); v {
	case "", "auto":
	default:
		d, err := time.ParseDuration(v)
		if err != nil {
			s.writeError(w, service.NewError(errcode.InvalidRequest, "resolution=%q: use 5s, 1m or auto", v))
			return
		}
		hq.Resolution = d
	}
	h, err := s.svc.MetricsHistory(r.PathValue("ref"), hq)
	if err != nil {
		s.writeError(w, err)
		return
	}
	// Compact: a day of a large pipeline's history is many points.
	b, err := json.Marshal(wireMetricsHistory(*h))
	if err != nil {
		s.writeError(w, service.NewError(errcode.Internal, "encoding the metrics history: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}

func parseHistoryTime(v string) (time.Time, error) {
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	return time.Parse(time.RFC3339Nano, v)
}
