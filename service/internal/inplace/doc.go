// Package inplace is the job service's in-place update (Dataflow's
// --update): the compatibility check of the new pipeline against the
// running job's graph, then a handover in five phases (prepare and check,
// pause, hand over, persist, finish) in which the new job takes the old
// one's state, open windows, timers and source positions over in memory,
// with one atomic store write. A refused check leaves the running job
// untouched. It is also how a Go program's new build takes over its
// running job (program.go, stored.go).
//
// It is built on the core and keeps a rollback snapshot of every job it
// replaces (package snapshots).
//
// It may import service/internal/core, service/internal/snapshots,
// service/internal/rewind, service/record, runner, runner/contract, state,
// graph, compat, errcode, weir (the SDK root package, whose pipelines a Go
// program builds) and the standard library.
package inplace

import (
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/internal/snapshots"
)

// InPlace is the in-place update flow of one job service.
type InPlace struct {
	*core.Core
	snaps *snapshots.Snapshots
}

// New returns the in-place update flow built on c, keeping rollback
// snapshots through snaps.
func New(c *core.Core, snaps *snapshots.Snapshots) *InPlace { return &InPlace{Core: c, snaps: snaps} }
