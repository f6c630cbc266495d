// Package rollback is the job service's rollback (`weir jobs rollback`):
// it goes back to an earlier generation of a job name by starting that
// generation's pipeline as a new job from the rollback snapshot kept when
// it was replaced (package snapshots), as a stop-and-replace (package
// replace) with the strategy "rollback"; during a parallel replacement's
// overlap it cancels the new job and keeps the old one. Every check runs
// before anything changes; a validate-only rollback changes nothing.
//
// It may import service/internal/core, service/internal/replace,
// service/internal/snapshots, service/record, graph, state, compat,
// duration, errcode and the standard library.
package rollback

import (
	"github.com/weir-dev/weir/service/internal/core"
	"github.com/weir-dev/weir/service/internal/replace"
	"github.com/weir-dev/weir/service/internal/snapshots"
)

// Rollback is the rollback flow of one job service.
type Rollback struct {
	*core.Core
	snaps   *snapshots.Snapshots
	replace *replace.Replace
}

// New returns the rollback flow built on c, starting its jobs from snaps'
// rollback snapshots through rep's stop-and-replace.
func New(c *core.Core, snaps *snapshots.Snapshots, rep *replace.Replace) *Rollback {
	return &Rollback{Core: c, snaps: snaps, replace: rep}
}
