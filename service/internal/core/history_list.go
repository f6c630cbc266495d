package core

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/service/record"
)

func sortJobsByCreation(jobs []*record.Job) {
	sort.SliceStable(jobs, func(i, k int) bool {
		if !jobs[i].CreateTime.Equal(jobs[k].CreateTime) {
			return jobs[i].CreateTime.Before(jobs[k].CreateTime)
		}
		return jobs[i].Generation < jobs[k].Generation
	})
}

func DecodeJSON(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decoding a registry record: %w", err)
	}
	return nil
}

// History lists every job of a name, oldest first, and every recorded
// update attempt that the check refused or only validated. It takes no
// lock.
func (s *Core) History(name string) ([]*record.Job, []Attempt, error) {
	if err := record.ValidateJobName(name); err != nil {
		return nil, nil, err
	}
	var jobs []*record.Job
	err := s.Store.Scan("job/", func(_ string, v []byte) error {
		j := &record.Job{}
		if err := UnmarshalJob(v, j); err != nil {
			return err
		}
		if j.Name == name {
			jobs = append(jobs, j)
		}
		return nil
	})
	if err != nil {
		return nil, nil, errcode.Internalf("reading the job registry: %w", err)
	}
	if len(jobs) == 0 {
		return nil, nil, errcode.Errorf(errcode.JobNotFound, "no job has the name %q", name)
	}
	sortJobsByCreation(jobs)
	var attempts []Attempt
	err = s.Store.Scan("attempt/"+name+"/", func(_ string, v []byte) error {
		var a Attempt
		if err := DecodeJSON(v, &a); err != nil {
			return err
		}
		attempts = append(attempts, a)
		return nil
	})
	if err != nil {
		return nil, nil, errcode.Internalf("reading update attempts of %q: %w", name, err)
	}
	return jobs, attempts, nil
}
