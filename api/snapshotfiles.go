package api

import (
	"net/http"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir/service"
)

// Portable snapshot files over the API (the format: service/snapshot_file.go
// and docs/JOBS.md):
//
//	GET  /v1/snapshots/{id}:export  → 200 application/octet-stream, the file
//	POST /v1/snapshots:import       {upload_id?, offset, data (base64), final?, ttl?}
//	                                → 200 {upload_id, received_bytes}; the final
//	                                chunk → 201 {upload_id, received_bytes, snapshot}
//
// An upload comes in chunks of at most ImportChunkBytes (a request body
// is at most MaxRequestBytes): the first without upload_id, each at the
// offset of the bytes sent so far; the final one imports the whole file,
// which is verified first (SNAPSHOT_CORRUPT for a damaged or truncated
// file; nothing is imported then).

func (s *Server) registerSnapshotFiles() {
	s.handleFunc("POST /v1/snapshots:import", s.importSnapshot)
}

// exportWriter sets the file's headers at the first write and reports
// whether anything was written (an error after that cannot be a reply).
type exportWriter struct {
	w       http.ResponseWriter
	id      string
	started bool
}

func (e *exportWriter) Write(b []byte) (int, error) {
	if !e.started {
		e.started = true
		h := e.w.Header()
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Disposition", `attachment; filename="`+e.id+`.weirsnap"`)
		e.w.WriteHeader(http.StatusOK)
	}
	return e.w.Write(b)
}

// exportSnapshot serves GET /v1/snapshots/{id}:export.
func (s *Server) exportSnapshot(w http.ResponseWriter, r *http.Request, id string) {
	ew := &exportWriter{w: w, id: id}
	if _, err := s.svc.ExportSnapshot(r.Context(), id, ew); err != nil {
		if !ew.started {
			s.writeError(w, err)
			return
		}
		// Part of the file is out: break the connection so that the
		// client sees a failed transfer, not a short file.
		s.logger.Error("exporting a snapshot failed part-way", "snapshot_id", id, "error", err)
		panic(http.ErrAbortHandler)
	}
}

func (s *Server) importSnapshot(w http.ResponseWriter, r *http.Request) {
	var req ImportRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if len(req.Data) > ImportChunkBytes {
		s.writeError(w, service.NewError(errcode.InvalidRequest, "a chunk carries at most %d bytes, this one %d", ImportChunkBytes, len(req.Data)))
		return
	}
	var c service.UploadChunk
	c.UploadID, c.Offset, c.Data, c.Final = req.UploadID, req.Offset, req.Data, req.Final
	if req.TTL != "" {
		ttl, err := service.ParseSnapshotTTL(req.TTL)
		if err != nil {
			s.writeError(w, err)
			return
		}
		c.TTL = ttl
	}
	prog, snap, err := s.svc.UploadSnapshotChunk(r.Context(), c)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := ImportResponse{UploadID: prog.UploadID, Received: prog.Received, Snapshot: wireSnapshotPtr(snap)}
	if snap == nil {
		writeJSON(w, http.StatusOK, out)
		return
	}
	w.Header().Set("Location", "/v1/snapshots/"+snap.ID)
	writeJSON(w, http.StatusCreated, out)
}
