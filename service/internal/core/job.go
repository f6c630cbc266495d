package core

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/manifest"
	"github.com/weir-dev/weir/service/record"
	"github.com/weir-dev/weir/yamlpipe"

	"github.com/weir-dev/weir/state"
)

// ---- registry access ----
//
// Reads take no lock: every record is written whole, atomically. A read
// that is modified and written back happens under the registry lock, or under the
// guards that exclude every other writer of the record (see the lock
// ordering in the package doc).

// GetJSON reads the record stored at key into a new T. A missing record
// is notFound when it is not nil, else the store's state.ErrNotFound
// (unwrapped, for errors.Is); what names the record in the other errors
// ("snapshot 0b1c…"). It takes no lock.
func GetJSON[T any](s *Core, key, what string, notFound error) (*T, error) {
	b, err := s.Store.Get(key)
	if errors.Is(err, state.ErrNotFound) && notFound != nil {
		return nil, notFound
	}
	if errors.Is(err, state.ErrNotFound) {
		return nil, err
	}
	if err != nil {
		return nil, errcode.Internalf("reading %s: %w", what, err)
	}
	v := new(T)
	if err := json.Unmarshal(b, v); err != nil {
		return nil, errcode.Internalf("decoding the record of %s: %w", what, err)
	}
	return v, nil
}

// ReadJob reads job id's record; a missing one is state.ErrNotFound.
func (s *Core) ReadJob(id string) (*record.Job, error) {
	return GetJSON[record.Job](s, record.JobKey(id), "job "+id, nil)
}

// ReadLineage reads the lineage of job name name; a name without one has
// an empty lineage.
func (s *Core) ReadLineage(name string) (*record.Lineage, error) {
	l, err := GetJSON[record.Lineage](s, record.LineageKey(name), fmt.Sprintf("job name %q", name), nil)
	if errors.Is(err, state.ErrNotFound) {
		return &record.Lineage{Name: name}, nil
	}
	return l, err
}

func PutJSON(w *state.Write, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return errcode.Internalf("encoding %s: %w", key, err)
	}
	w.Put(key, b)
	return nil
}

// resolve finds a job by ID, or by name: the name's active job, or its
// latest job when none is active. It takes no lock.
func (s *Core) Resolve(ref string) (*record.Job, error) {
	if ref == "" {
		return nil, errcode.Errorf(errcode.JobNotFound, "no job ID or name given")
	}
	j, err := s.ReadJob(ref)
	if err == nil {
		return j, nil
	}
	if !errors.Is(err, state.ErrNotFound) {
		return nil, errcode.Internalf("reading job %s: %w", ref, err)
	}
	if record.IsJobName(ref) {
		l, err := s.ReadLineage(ref)
		if err != nil {
			return nil, err
		}
		id := l.ActiveJobID
		if id == "" {
			id = l.LatestJobID
		}
		if id != "" {
			j, err := s.ReadJob(id)
			if err != nil {
				return nil, errcode.Internalf("reading job %s of name %q: %w", id, ref, err)
			}
			return j, nil
		}
	}
	return nil, errcode.Errorf(errcode.JobNotFound, "no job has the ID or name %q", ref)
}

// lineageForNewJob reads the lineage of name for a new job of it, refusing
// while the service closes or while the name has an active job. The caller
// holds the name's guard, so the answer stays true until it is released.
func (s *Core) LineageForNewJob(name string) (*record.Lineage, error) {
	if s.Closing.Load() {
		return nil, errcode.Errorf(errcode.ShuttingDown, "the weir server is shutting down; submit again once it is back")
	}
	l, err := s.ReadLineage(name)
	if err != nil {
		return nil, err
	}
	if l.ActiveJobID != "" {
		active, err := s.ReadJob(l.ActiveJobID)
		if err != nil {
			return nil, errcode.Internalf("reading the active job of %q: %w", name, err)
		}
		return nil, errcode.Errorf(errcode.JobNameActive, "job name %q already has an active job, %s (%s): drain or cancel it first, or choose another name", name, active.ID, active.State)
	}
	return l, nil
}

// AccessCode is the code of a pipeline that does not load: what the
// server's access rules or the loader's budgets refused, else
// INVALID_PIPELINE.
func AccessCode(err error) errcode.Code {
	switch {
	case errors.Is(err, yamlpipe.ErrPathNotAllowed):
		return errcode.PathNotAllowed
	case errors.Is(err, yamlpipe.ErrSQLHostNotAllowed):
		return errcode.SQLHostNotAllowed
	case errors.Is(err, yamlpipe.ErrOutputExists):
		return errcode.OutputExists
	case errors.Is(err, yamlpipe.ErrBudgetExceeded):
		return errcode.PipelineBudgetExceeded
	case errors.Is(err, manifest.ErrChanged):
		return errcode.ManifestChanged
	case errors.Is(err, manifest.ErrNotFound):
		return errcode.ManifestNotFound
	}
	return errcode.InvalidPipeline
}
