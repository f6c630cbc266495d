// Package snapshots is the job service's flow of job snapshots (Dataflow's
// snapshots): a snapshot of a running job (its cut is one checkpoint; its
// state is copied into the store's snapshot key space without stopping the
// job), snapshots of the job's subscriptions at the cut, expiry, portable
// snapshot files (export, import, chunked upload), jobs created from a
// snapshot, and the rollback snapshots every update and replacement keeps
// of the job it replaces (rollback_cut.go).
//
// It is built on the core (package core) and registers with it as a
// core.Flow: at Start it fails the snapshots a stop cut short, and it
// deletes expired ones every checkpoint interval.
//
// It may import service/internal/core, service/record, state, graph,
// compat, duration, errcode, runner (the open windows of a stored
// aggregation key), runner/contract and the standard library.
package snapshots

import (
	"context"

	"github.com/weir-dev/weir/service/internal/core"
)

// Snapshots is the snapshot flow of one job service.
type Snapshots struct {
	*core.Core
	core.BaseFlow
}

// New returns the snapshot flow built on c; the caller registers it with c
// (Core.Register) before c starts.
func New(c *core.Core) *Snapshots { return &Snapshots{Core: c} }

// Open fails the snapshots a stop cut short, deletes expired ones, and
// starts deleting expired ones every checkpoint interval (core.Flow).
func (s *Snapshots) Open(context.Context) error {
	if err := s.recoverSnapshots(); err != nil {
		return err
	}
	s.Spawn(s.expireLoop)
	return nil
}
