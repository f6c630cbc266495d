package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

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

// ImportChunkBytes is the most file bytes one import request carries
// (base64 in JSON: under MaxRequestBytes).
const ImportChunkBytes = 4 << 20

// ImportRequest is the body of POST /v1/snapshots:import.
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
	UploadID string            `json:"upload_id"`
	Received int64             `json:"received_bytes"`
	Snapshot *service.Snapshot `json:"snapshot,omitempty"`
}

func (s *Server) registerSnapshotFiles() {
	s.mux.HandleFunc("POST /v1/snapshots:import", s.importSnapshot)
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

// exportSnapshot serves GET /v1/snapshots/{id}:export (from getSnapshot).
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
	out := ImportResponse{UploadID: prog.UploadID, Received: prog.Received, Snapshot: snap}
	if snap == nil {
		writeJSON(w, http.StatusOK, out)
		return
	}
	w.Header().Set("Location", "/v1/snapshots/"+snap.ID)
	writeJSON(w, http.StatusCreated, out)
}

// ExportSnapshot downloads snapshot id's file into w and returns its
// size. The transfer has no overall timeout (ctx bounds it): a file may
// be large. The caller verifies it (service.VerifySnapshotFile) before
// trusting it; a transfer broken by the server is an error.
func (c *Client) ExportSnapshot(ctx context.Context, id string, w io.Writer) (int64, error) {
	path := "/v1/snapshots/" + url.PathEscape(id) + ":export"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return 0, fmt.Errorf("building the request: %w", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	hc := &http.Client{Transport: c.http.Transport, CheckRedirect: c.http.CheckRedirect, Jar: c.http.Jar}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, fmt.Errorf("%w at %s: %v", ErrUnreachable, c.base, err)
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
func (c *Client) ImportSnapshot(ctx context.Context, r io.Reader, ttl string, progress func(sent int64)) (*service.Snapshot, error) {
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

// isExport reports whether the path value of GET /v1/snapshots/{id} asks
// for the export action, and returns the ID.
func isExport(v string) (string, bool) { return strings.CutSuffix(v, ":export") }
