package plan

import "github.com/weir-dev/weir/serviceopt"

// ForServiceOptions returns the Options (Strategy and Rewind) that an
// update's service options ask for: in place unless they ask for a
// replacement, whose re-read of retained input (weir_replace_rewind)
// decides where sources resume. A replacement under a new name
// (parallel_replace_job_name) is planned as the submission of a new job
// it is; anything else as an update of the running job's name. Options
// that do not parse or do not combine are serviceopt's errors.
func ForServiceOptions(serviceOptions []string) (Options, error) {
	opts, err := serviceopt.Parse(serviceOptions)
	if err != nil {
		return Options{}, err
	}
	sameName := opts.ReplaceJobName == "" && opts.ReplaceJobID == ""
	sp, err := opts.Resolve("plan", sameName, nil)
	if err != nil {
		return Options{}, err
	}
	popts := Options{Strategy: InPlace}
	if sp.Replacement() {
		rewind := sp.Rewind
		popts.Strategy, popts.Rewind = Strategy(sp.Strategy), &rewind
	}
	return popts, nil
}
