package api

import (
	"net/http"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/io/sqlsink"
	"github.com/weir-dev/weir/service/record"
)

// The publication log of a job name's partition runs: GET
// /v1/partitions/{name} (weir partitions list), POST
// /v1/partitions/{name}:prune (weir partitions prune).

func (s *Server) registerPartitions() {
	s.handleFunc("GET /v1/partitions/{name}", s.listPartitions)
	s.handleActions("partitions", "partitions", nil, namedAction{"prune", s.prunePartitions})
}

func (s *Server) listPartitions(w http.ResponseWriter, r *http.Request) {
	if s.refuseAction(w, r) {
		return
	}
	if err := noQuery(r); err != nil {
		s.writeError(w, err)
		return
	}
	ps, err := s.svc.Partitions(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := client.PartitionList{Partitions: make([]client.Partition, 0, len(ps))}
	for _, p := range ps {
		out.Partitions = append(out.Partitions, partitionOf(p))
	}
	writeJSON(w, http.StatusOK, out)
}

// prunePartitions serves POST /v1/partitions/{name}:prune ({partition,
// statuses, dry_run}, every field optional; an empty body is {}).
func (s *Server) prunePartitions(w http.ResponseWriter, r *http.Request, name string) {
	var req client.PruneRequest
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			s.writeError(w, err)
			return
		}
	}
	ps, err := s.svc.PrunePartitions(r.Context(), name, req.Partition, req.Statuses, req.DryRun)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := client.PruneResult{Removed: make([]client.Partition, 0, len(ps)), DryRun: req.DryRun}
	for _, p := range ps {
		out.Removed = append(out.Removed, partitionOf(p))
	}
	writeJSON(w, http.StatusOK, out)
}

// partitionOf is the wire form of a partition run. The DSN stays on the
// server (it may hold a password); a SQLite database's path is served as
// the sqlite:PATH#TABLE specifier weir diff reads, a PostgreSQL database
// as postgres://...#TABLE without its password and the server's files
// (the client brings its own, as libpq clients do), a file sink's version
// directory and publication manifest as the files weir diff reads.
func partitionOf(p record.PartitionRun) client.Partition {
	out := client.Partition{Partition: p.Partition, Status: p.Status, Target: p.Target, Table: p.Table, Driver: p.Driver,
		JobID: p.JobID, ManifestDigest: p.ManifestDigest, OutputDigest: p.OutputDigest, Rows: p.Rows, Replaced: p.Replaced,
		PublishedAt: p.PublishedAt}
	switch p.Driver {
	case "sqlite":
		out.Source = "sqlite:" + p.DSN + "#" + p.Table
		out.TargetSource = "sqlite:" + p.DSN + "#" + p.Target
	case sqlsink.DriverPostgres:
		if u, err := sqlsink.PublicPostgresURL(p.DSN); err == nil {
			out.Source = u + "#" + p.Table
			out.TargetSource = u + "#" + p.Target
		}
	case record.DriverFiles:
		// A version directory, and the partition's published version
		// through the publication manifest: what weir diff reads.
		out.Source = p.Table
		out.TargetSource = p.DSN + "#" + p.Partition
	}
	return out
}
