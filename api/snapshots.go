package api

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir/service"
)

// The job snapshot routes (Dataflow's snapshots) and create-from-snapshot:
//
//	POST   /v1/snapshots                 {job_id, ttl?, description?, snapshot_sources?} → 201 snapshot (RUNNING, or FAILED)
//	POST   /v1/jobs/{id_or_name}:snapshot  {ttl?, description?, snapshot_sources?} (body optional) → 201 snapshot
//	GET    /v1/snapshots?job_id=ID|NAME&all=true  → {snapshots: [snapshot...]} newest first; all: DELETED too
//	GET    /v1/snapshots/{id}            → snapshot (DELETED for a deleted one)
//	DELETE /v1/snapshots/{id}            → the DELETED snapshot
//	GET    /v1/snapshots/{id}:export     → the snapshot's portable file (snapshotfiles.go)
//	POST   /v1/snapshots:import          chunked upload of a file (snapshotfiles.go)
//	POST   /v1/jobs:createFromSnapshot   {name, pipeline, pipeline_file, base_dir, options, snapshot_id,
//	                                      transform_name_mapping?, allow_source_change?} → {report, job};
//	                                     409 INCOMPATIBLE_UPDATE with the same body when the check refuses
//
// A ttl is a weir duration ("7d", "36h"), 1h to 30d, default 7d.

// CreateSnapshotRequest is the body of POST /v1/snapshots (JobID is taken
// from the path on POST /v1/jobs/{ref}:snapshot).
type CreateSnapshotRequest struct {
	JobID           string `json:"job_id,omitempty"`
	TTL             string `json:"ttl,omitempty"`
	Description     string `json:"description,omitempty"`
	SnapshotSources bool   `json:"snapshot_sources,omitempty"`
}

// SnapshotList is the reply of GET /v1/snapshots.
type SnapshotList struct {
	Snapshots []*service.Snapshot `json:"snapshots"`
}

// FromSnapshotRequest is the body of POST /v1/jobs:createFromSnapshot: a
// new job that starts from a snapshot's state and positions.
type FromSnapshotRequest struct {
	SubmitRequest
	SnapshotID           string `json:"snapshot_id"`
	TransformNameMapping string `json:"transform_name_mapping,omitempty"`
	AllowSourceChange    bool   `json:"allow_source_change,omitempty"`
}

// registerSnapshots adds the snapshot routes to the mux.
func (s *Server) registerSnapshots() {
	s.mux.HandleFunc("POST /v1/snapshots", s.createSnapshot)
	s.mux.HandleFunc("GET /v1/snapshots", s.listSnapshots)
	s.mux.HandleFunc("GET /v1/snapshots/{id}", s.getSnapshot)
	s.mux.HandleFunc("DELETE /v1/snapshots/{id}", s.deleteSnapshot)
	s.mux.HandleFunc("POST /v1/jobs:createFromSnapshot", s.createFromSnapshot)
	s.registerSnapshotFiles()
}

func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) {
	var req CreateSnapshotRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	s.snapshot(w, r, req)
}

// snapshotJob serves POST /v1/jobs/{ref}:snapshot (from act).
func (s *Server) snapshotJob(w http.ResponseWriter, r *http.Request, ref string) {
	var req CreateSnapshotRequest
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			s.writeError(w, err)
			return
		}
	}
	if req.JobID != "" && req.JobID != ref {
		s.writeError(w, service.NewError(errcode.InvalidRequest, "job_id %q in the body differs from the job %q of the path", req.JobID, ref))
		return
	}
	req.JobID = ref
	s.snapshot(w, r, req)
}

func (s *Server) snapshot(w http.ResponseWriter, r *http.Request, req CreateSnapshotRequest) {
	if req.JobID == "" {
		s.writeError(w, service.NewError(errcode.InvalidRequest, "job_id is required: the ID or name of the job to snapshot"))
		return
	}
	ttl, err := service.ParseSnapshotTTL(req.TTL)
	if err != nil {
		s.writeError(w, err)
		return
	}
	snap, err := s.svc.CreateSnapshot(r.Context(), service.SnapshotRequest{Job: req.JobID, TTL: ttl,
		Description: req.Description, SnapshotSources: req.SnapshotSources})
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set("Location", "/v1/snapshots/"+snap.ID)
	writeJSON(w, http.StatusCreated, snap)
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		if k != "job_id" && k != "all" {
			s.writeError(w, service.NewError(errcode.InvalidRequest, "unknown query parameter %q (known: job_id, all)", k))
			return
		}
	}
	all := false
	switch q.Get("all") {
	case "", "false":
	case "true":
		all = true
	default:
		s.writeError(w, service.NewError(errcode.InvalidRequest, "all must be true or false, got %q", q.Get("all")))
		return
	}
	list, err := s.svc.ListSnapshots(q.Get("job_id"), all)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, SnapshotList{Snapshots: list})
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	if id, ok := isExport(r.PathValue("id")); ok {
		s.exportSnapshot(w, r, id)
		return
	}
	snap, err := s.svc.GetSnapshot(r.PathValue("id"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, snap)
}

func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	snap, err := s.svc.DeleteSnapshot(r.PathValue("id"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, snap)
}

func (s *Server) createFromSnapshot(w http.ResponseWriter, r *http.Request) {
	var req FromSnapshotRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	res, err := s.svc.CreateFromSnapshot(r.Context(), service.FromSnapshotRequest{
		SubmitRequest: service.SubmitRequest{Name: req.Name, Pipeline: req.Pipeline, PipelineFile: req.PipelineFile,
			BaseDir: req.BaseDir, Options: req.Options},
		SnapshotID: req.SnapshotID, Mapping: req.TransformNameMapping, AllowSourceChange: req.AllowSourceChange})
	if err != nil && res == nil {
		s.writeError(w, err)
		return
	}
	out := UpdateResponse{Report: res.Report}
	status := http.StatusCreated
	if res.Job != nil {
		out.Job = &SubmitResponse{ID: res.Job.ID, Name: res.Job.Name, State: res.Job.State, Error: res.Job.Error}
		w.Header().Set("Location", "/v1/jobs/"+res.Job.ID)
	}
	if err != nil {
		code := service.ErrorCode(err)
		status = StatusOf(code)
		out.Error = &ErrorDetail{Code: code, Message: err.Error()}
	}
	writeJSON(w, status, out)
}

// CreateSnapshot asks for a snapshot of job req.JobID; the reply is the
// snapshot as soon as its cut is taken (RUNNING, or FAILED).
func (c *Client) CreateSnapshot(ctx context.Context, req CreateSnapshotRequest) (*service.Snapshot, error) {
	var out service.Snapshot
	if err := c.do(ctx, http.MethodPost, "/v1/snapshots", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListSnapshots lists the snapshots of job ref (an ID or a name; "" for
// all), DELETED ones too with all.
func (c *Client) ListSnapshots(ctx context.Context, ref string, all bool) ([]*service.Snapshot, error) {
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
func (c *Client) GetSnapshot(ctx context.Context, id string) (*service.Snapshot, error) {
	var out service.Snapshot
	if err := c.do(ctx, http.MethodGet, "/v1/snapshots/"+url.PathEscape(id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSnapshot deletes snapshot id and returns its DELETED record.
func (c *Client) DeleteSnapshot(ctx context.Context, id string) (*service.Snapshot, error) {
	var out service.Snapshot
	if err := c.do(ctx, http.MethodDelete, "/v1/snapshots/"+url.PathEscape(id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WaitSnapshot polls snapshot id every interval until it is READY, FAILED
// or DELETED, calling progress (when set) with every state read.
func (c *Client) WaitSnapshot(ctx context.Context, id string, interval time.Duration, progress func(*service.Snapshot)) (*service.Snapshot, error) {
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
		case service.SnapshotReady, service.SnapshotFailed, service.SnapshotDeleted:
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
