package service

import (
	"context"

	"github.com/weir-dev/weir/serviceopt"
)

// stopAndReplace would start the stop-and-replace of old by req's
// pipeline with a plain continuation (weir_replace_rewind=false). The flow
// is not built yet: every check has passed, and the request is refused
// without changing anything.
func (s *Service) stopAndReplace(_ context.Context, _ UpdateRequest, _ serviceopt.Plan, old *Job) (*UpdateResult, error) {
	return nil, errorf(CodeReplacementUnavailable, "stop-and-replace is not offered by this server yet; job %s (%s) was not changed: update it in place (--update) if the new pipeline is compatible, or drain it and submit the new pipeline", old.Name, old.ID)
}
