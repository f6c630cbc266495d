package api

import (
	"net/http"

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

// registerSnapshots adds the snapshot routes to the mux.
func (s *Server) registerSnapshots() {
	s.handleFunc("POST /v1/snapshots", s.createSnapshot)
	s.handleFunc("GET /v1/snapshots", s.listSnapshots)
	s.handleGetAction("snapshots", s.getSnapshot, namedAction{"export", s.exportSnapshot})
	s.handleFunc("DELETE /v1/snapshots/{id}", s.deleteSnapshot)
	s.handleFunc("POST /v1/jobs:createFromSnapshot", s.createFromSnapshot)
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

// snapshotJob serves POST /v1/jobs/{ref}:snapshot.
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
	writeJSON(w, http.StatusCreated, wireSnapshot(*snap))
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
	writeJSON(w, http.StatusOK, SnapshotList{Snapshots: wireSlice(list, wireSnapshotPtr)})
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	snap, err := s.svc.GetSnapshot(r.PathValue("name"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, wireSnapshot(*snap))
}

func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	snap, err := s.svc.DeleteSnapshot(r.PathValue("id"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, wireSnapshot(*snap))
}

func (s *Server) createFromSnapshot(w http.ResponseWriter, r *http.Request) {
	var req FromSnapshotRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	res, err := s.svc.CreateFromSnapshot(r.Context(), service.FromSnapshotRequest{
		SubmitRequest: service.SubmitRequest{Name: req.Name, Pipeline: req.Pipeline, PipelineFile: req.PipelineFile,
			BaseDir: req.BaseDir, Options: serviceOptions(req.Options)},
		SnapshotID: req.SnapshotID, Mapping: req.TransformNameMapping, AllowSourceChange: req.AllowSourceChange,
		ValidateOnly: req.ValidateOnly, SourcePositions: req.SourcePositions})
	if err != nil && res == nil {
		s.writeError(w, err)
		return
	}
	out := UpdateResponse{Report: wireCompatReport(res.Report), Notes: res.Notes,
		SourcePositions: wireSlice(res.SourcePositions, wireSourcePlacement)}
	status := http.StatusCreated
	if req.ValidateOnly {
		status = http.StatusOK // nothing was created
	}
	if res.Job != nil {
		out.Job = &SubmitResponse{ID: res.Job.ID, Name: res.Job.Name, State: wireState(res.Job.State), Error: res.Job.Error}
		w.Header().Set("Location", "/v1/jobs/"+res.Job.ID)
	}
	if err != nil {
		code := service.ErrorCode(err)
		status = StatusOf(code)
		out.Error = &ErrorDetail{Code: code, Message: err.Error()}
	}
	writeJSON(w, status, out)
}
