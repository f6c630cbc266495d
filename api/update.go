package api

import (
	"net/http"

	"github.com/weir-dev/weir/service"
)

func (s *Server) registerUpdate() {
	s.handleFunc("POST /v1/jobs:update", s.update)
	s.handleFunc("GET /v1/history/{name}", s.history)
	s.handleFunc("POST /v1/jobs/{ref}/options", s.updateOptions)
}

func (s *Server) updateOptions(w http.ResponseWriter, r *http.Request) {
	var req OptionsRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	j, err := s.svc.UpdateOptions(r.Context(), r.PathValue("ref"), serviceOptions(req.Options))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, OptionsResponse{Summary: wireSummary(j.Summary()), Options: wireJobOptions(j.Options)})
}

func (s *Server) update(w http.ResponseWriter, r *http.Request) {
	var req UpdateRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	res, err := s.svc.Update(r.Context(), service.UpdateRequest{
		SubmitRequest: serviceSubmit(req.SubmitRequest),
		Mapping:       req.TransformNameMapping, AllowSourceChange: req.AllowSourceChange, ValidateOnly: req.ValidateOnly,
		JinjaVariables: req.JinjaVariables})
	if err != nil && res == nil {
		s.writeError(w, err)
		return
	}
	out := UpdateResponse{Report: wireCompatReport(res.Report), Replaced: wirePtr(res.Replaced, wireSummary), PauseMS: res.PauseMillis, InStore: res.InStore,
		Options: wirePtr(res.Options, wireJobOptions), OptionsChanged: wireSlice(res.OptionsChanged, wireOptionChange), Notes: res.Notes,
		Graph: res.Graph, RenderedPipeline: res.RenderedPipeline, Rehearsal: wirePtr(res.Rehearsal, wireRehearsalVerdict)}
	if res.Job != nil {
		sr := submitResponse(res.Job)
		out.Job = &sr
	}
	if req.ValidateOnly {
		out.Plan = s.updatePlan(req, res.Graph)
	}
	status := http.StatusOK
	if err != nil {
		code := service.ErrorCode(err)
		status = StatusOf(code)
		out.Error = &ErrorDetail{Code: code, Message: err.Error()}
	}
	writeJSON(w, status, out)
}

func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	jobs, attempts, err := s.svc.History(name)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if attempts == nil {
		attempts = []service.Attempt{}
	}
	gens, err := s.svc.LineageHistory(name)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, HistoryResponse{Name: name, Jobs: wireSlice(jobs, wireJobPtr),
		Attempts: wireSlice(attempts, wireAttempt), Generations: wireSlice(gens, wireGenerationHistory)})
}
