package api

import (
	"net/http"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/manifest"
	"github.com/weir-dev/weir/service"
)

// The input manifest routes:
//
//	POST /v1/manifests                 {name, partition, files, side_inputs?} → 201 manifest (200 with existed: an identical one existed)
//	GET  /v1/manifests                 → {manifests: [...]} by name, then partition
//	GET  /v1/manifests/{name}[?partition=P] → {manifests: [...]} of name; with partition, that manifest

// registerManifests adds the manifest routes to the mux.
func (s *Server) registerManifests() {
	s.handleFunc("POST /v1/manifests", s.createManifest)
	s.handleFunc("GET /v1/manifests", s.listManifests)
	s.handleFunc("GET /v1/manifests/{name}", s.getManifest)
}

func (s *Server) createManifest(w http.ResponseWriter, r *http.Request) {
	var req client.CreateManifestRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	m, created, err := s.svc.CreateManifest(service.ManifestRequest{Name: req.Name, Partition: req.Partition,
		Files: req.Files, SideInputs: req.SideInputs})
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := wireManifest(m)
	status := http.StatusCreated
	if !created {
		out.Existed, status = true, http.StatusOK
	}
	w.Header().Set("Location", "/v1/manifests/"+m.Name+"?partition="+m.Partition)
	writeJSON(w, status, out)
}

func (s *Server) listManifests(w http.ResponseWriter, r *http.Request) {
	ms, err := s.svc.ListManifests("")
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, client.ManifestList{Manifests: wireSlice(ms, wireManifest)})
}

func (s *Server) getManifest(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if p := r.URL.Query().Get("partition"); p != "" {
		m, err := s.svc.GetManifest(name, p)
		if err != nil {
			s.writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, wireManifest(m))
		return
	}
	if r.URL.Query().Has("partition") {
		s.writeError(w, service.NewError(errcode.InvalidRequest, "partition is empty: give ?partition=P or leave it out for every partition"))
		return
	}
	ms, err := s.svc.ListManifests(name)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, client.ManifestList{Manifests: wireSlice(ms, wireManifest)})
}

// wireManifest converts a manifest to its wire form.
func wireManifest(m *manifest.Manifest) *client.Manifest {
	out := &client.Manifest{Name: m.Name, Partition: m.Partition, CreateTime: m.CreateTime, Digest: m.Digest,
		Files: make([]client.ManifestFile, len(m.Files))}
	for i, f := range m.Files {
		out.Files[i] = client.ManifestFile(f)
	}
	for _, si := range m.SideInputs {
		out.SideInputs = append(out.SideInputs, client.ManifestSideInput{Name: si.Name, ManifestFile: client.ManifestFile(si.File)})
	}
	return out
}
