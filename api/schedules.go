package api

import (
	"context"
	"net/http"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/service"
	"github.com/weir-dev/weir/service/record"
)

// The schedule routes (weir schedules):
//
//	POST   /v1/schedules                  {name, pipeline, base_dir, every|cron, files, ...} → 201 schedule
//	GET    /v1/schedules                  → {schedules: [...]} by name
//	GET    /v1/schedules/{name}           → schedule with its versions and runs
//	DELETE /v1/schedules/{name}           → the deleted schedule
//	POST   /v1/schedules/{name}:switch    {pipeline, base_dir, from_partition?} → schedule
//	POST   /v1/schedules/{name}:rollback  → schedule
//	POST   /v1/schedules/{name}:pause     → schedule
//	POST   /v1/schedules/{name}:resume    → schedule
//	POST   /v1/schedules/{name}:retry     {partition} → schedule

// registerSchedules adds the schedule routes to the mux.
func (s *Server) registerSchedules() {
	s.handleFunc("POST /v1/schedules", s.createSchedule)
	s.handleFunc("GET /v1/schedules", s.listSchedules)
	s.handleFunc("GET /v1/schedules/{name}", s.getSchedule)
	s.handleFunc("DELETE /v1/schedules/{name}", s.deleteSchedule)
	s.handleActions("schedules", "schedule", nil,
		namedAction{"switch", s.switchSchedule}, namedAction{"rollback", s.rollbackSchedule},
		namedAction{"pause", s.pauseSchedule}, namedAction{"resume", s.resumeSchedule},
		namedAction{"retry", s.retrySchedule})
}

func (s *Server) createSchedule(w http.ResponseWriter, r *http.Request) {
	var req client.CreateScheduleRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	in := service.ScheduleRequest{Name: req.Name, JobName: req.JobName, Pipeline: req.Pipeline, PipelineFile: req.PipelineFile,
		BaseDir: req.BaseDir, Options: serviceOptions(req.Options), Every: req.Every, Cron: req.Cron, FileSets: req.FileSets, ReadyFile: req.ReadyFile, Delay: req.Delay,
		PartitionTemplate: req.PartitionTemplate, Files: req.Files, SideInputs: req.SideInputs, MaxAttempts: req.MaxAttempts,
		RetryBackoff: req.RetryBackoff}
	if req.Start != nil {
		in.Start = *req.Start
	}
	sch, err := s.svc.CreateSchedule(r.Context(), in)
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set("Location", "/v1/schedules/"+sch.Name)
	writeJSON(w, http.StatusCreated, wireSchedule(sch))
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, err)
		return
	}
	all, err := s.svc.ListSchedules()
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, client.ScheduleList{Schedules: wireSlice(all, wireSchedule)})
}

func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) {
	if s.refuseAction(w, r) {
		return
	}
	s.answerSchedule(w, func() (*record.Schedule, error) { return s.svc.GetSchedule(r.PathValue("name")) })
}

func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	if s.refuseAction(w, r) {
		return
	}
	s.answerSchedule(w, func() (*record.Schedule, error) { return s.svc.DeleteSchedule(r.PathValue("name")) })
}

func (s *Server) switchSchedule(w http.ResponseWriter, r *http.Request, name string) {
	var req client.SwitchScheduleRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	s.answerSchedule(w, func() (*record.Schedule, error) {
		return s.svc.SwitchSchedule(r.Context(), service.ScheduleSwitchRequest{Name: name, Pipeline: req.Pipeline,
			PipelineFile: req.PipelineFile, BaseDir: req.BaseDir, Options: serviceOptions(req.Options), FromPartition: req.FromPartition})
	})
}

func (s *Server) rollbackSchedule(w http.ResponseWriter, r *http.Request, name string) {
	s.emptyScheduleAction(w, r, func(ctx context.Context) (*record.Schedule, error) { return s.svc.RollbackSchedule(ctx, name) })
}

func (s *Server) pauseSchedule(w http.ResponseWriter, r *http.Request, name string) {
	s.emptyScheduleAction(w, r, func(context.Context) (*record.Schedule, error) { return s.svc.PauseSchedule(name, true) })
}

func (s *Server) resumeSchedule(w http.ResponseWriter, r *http.Request, name string) {
	s.emptyScheduleAction(w, r, func(context.Context) (*record.Schedule, error) { return s.svc.PauseSchedule(name, false) })
}

func (s *Server) retrySchedule(w http.ResponseWriter, r *http.Request, name string) {
	var req client.RetryScheduleRequest
	if err := decode(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	s.answerSchedule(w, func() (*record.Schedule, error) { return s.svc.RetrySchedulePartition(name, req.Partition) })
}

// emptyScheduleAction serves a schedule action without a body (an empty
// JSON object is accepted).
func (s *Server) emptyScheduleAction(w http.ResponseWriter, r *http.Request, do func(context.Context) (*record.Schedule, error)) {
	var req struct{}
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			s.writeError(w, err)
			return
		}
	}
	s.answerSchedule(w, func() (*record.Schedule, error) { return do(r.Context()) })
}

// answerSchedule answers 200 with the schedule get returns, or its error.
func (s *Server) answerSchedule(w http.ResponseWriter, get func() (*record.Schedule, error)) {
	sch, err := get()
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, wireSchedule(sch))
}

// wireSchedule converts a schedule to its wire form, with its next
// partition.
func wireSchedule(in *record.Schedule) *client.Schedule {
	out := &client.Schedule{Name: in.Name, JobName: in.JobName, Every: in.Every, Cron: in.Cron, FileSets: in.FileSets, ReadyFile: in.ReadyFile, Start: in.Start, Delay: in.Delay,
		PartitionTemplate: in.PartitionTemplate, Files: in.Files, SideInputs: in.SideInputs, MaxAttempts: in.MaxAttempts,
		RetryBackoff: in.RetryBackoff, Paused: in.Paused, CreateTime: in.CreateTime, UpdateTime: in.UpdateTime, Next: in.Next,
		Versions: make([]client.ScheduleVersion, len(in.Versions)), Runs: make([]client.ScheduleRun, len(in.Runs))}
	out.NextPartition, out.NextDue = service.ScheduleNext(in)
	for i, v := range in.Versions {
		out.Versions[i] = client.ScheduleVersion{Version: v.Version, Pipeline: v.Pipeline, PipelineFile: v.PipelineFile, BaseDir: v.BaseDir,
			Options: wireJobOptions(v.Options), From: v.From, FromPartition: v.FromPartition, CreateTime: v.CreateTime,
			RolledBack: v.RolledBack, RolledBackTime: v.RolledBackTime}
	}
	for i, r := range in.Runs {
		out.Runs[i] = client.ScheduleRun{Partition: r.Partition, Start: r.Start, End: r.End, Due: r.Due, Version: r.Version,
			Status: r.Status, Attempts: r.Attempts, JobID: r.JobID, JobIDs: r.JobIDs, ManifestDigest: r.ManifestDigest,
			Error: r.Error, NextAttempt: r.NextAttempt, UpdateTime: r.UpdateTime}
	}
	return out
}
