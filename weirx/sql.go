package weirx

import (
	"fmt"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/io/sqlsink"
	"github.com/weir-dev/weir/row"
)

// WriteToSql adds a SQL sink (package io/sqlsink: SQLite by default, or
// PostgreSQL) writing the rows of in, which have the given schema. The
// job's identity comes from the job the pipeline is built for
// (weir.Pipeline.Job): the sink's progress record is per job and step, its
// rows carry the job's ID and generation, and an empty SQLite DSN means a
// file in the data directory. Without a job (an in-process run) the sink
// commits once, at the end. It returns configuration errors.
func WriteToSql(s weir.Scope, name string, in weir.PCollection[*row.Row], schema *row.Schema, cfg sqlsink.Config) error {
	job := s.Pipeline().Job()
	if cfg.DataDir == "" {
		cfg.DataDir = job.DataDir
	}
	if cfg.DataDir == "" {
		cfg.DataDir = "weir-data"
	}
	cfg.JobID, cfg.Generation = job.ID, job.Generation
	if job.ID != "" {
		// Epochs restart with every job, so the progress record is per job.
		cfg.SinkID = job.ID + "/" + name
	} else {
		cfg.SinkID = "local/" + name
	}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("step %q: %w", name, err)
	}
	if err := sqlsink.CheckAccumulation(cfg.Mode, in.Windowing()); err != nil {
		return fmt.Errorf("step %q: %w", name, err)
	}
	sink, err := sqlsink.New(cfg, schema)
	if err != nil {
		return fmt.Errorf("step %q: %w", name, err)
	}
	weir.Write(s, name, in, sink, weir.WithSinkIdentity("sql", cfg.Driver+":"+cfg.Table))
	return nil
}
