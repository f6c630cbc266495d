package service

import (
	"time"

	"github.com/weir-dev/weir/service/internal/rollback"
)

// Temporary aliases while the rollback moves to package rollback.
type (
	RollbackRequest = rollback.RollbackRequest
	RollbackResult  = rollback.RollbackResult
	RollbackSource  = rollback.RollbackSource
	RollbackWindows = rollback.RollbackWindows
	RetentionReader = rollback.RetentionReader
)

// DefaultRollbackMaxStop is rollback.DefaultRollbackMaxStop.
const DefaultRollbackMaxStop = rollback.DefaultRollbackMaxStop

// ParseRollbackMaxStop is rollback.ParseRollbackMaxStop.
func ParseRollbackMaxStop(v string) (time.Duration, error) { return rollback.ParseRollbackMaxStop(v) }
