package record

import (
	"strings"
	"testing"

	"github.com/weir-dev/weir/errcode"
)

// TestJobOptionsDefaultsAndValidate: a submission's options as the server
// fills and checks them — a minimum without a worker count starts the job
// at the minimum, and each refusal names the options that disagree.
func TestJobOptionsDefaultsAndValidate(t *testing.T) {
	for _, tc := range []struct {
		name        string
		in          JobOptions
		wantWorkers int
		wantErr     string // empty: valid
	}{
		{name: "nothing given", in: JobOptions{}, wantWorkers: 1},
		{name: "minimum alone", in: JobOptions{MinNumWorkers: 3}, wantWorkers: 3},
		{name: "range without a count", in: JobOptions{MinNumWorkers: 2, MaxNumWorkers: 8}, wantWorkers: 2},
		{name: "count within the range", in: JobOptions{NumWorkers: 4, MinNumWorkers: 2, MaxNumWorkers: 8}, wantWorkers: 4},
		{name: "minimum over the maximum", in: JobOptions{MinNumWorkers: 3, MaxNumWorkers: 2}, wantWorkers: 3,
			wantErr: "options.min_num_workers 3 is larger than max_num_workers 2"},
		{name: "count under the minimum", in: JobOptions{NumWorkers: 1, MinNumWorkers: 2}, wantWorkers: 1,
			wantErr: "options.num_workers 1 is less than min_num_workers 2"},
		{name: "count over the maximum", in: JobOptions{NumWorkers: 5, MaxNumWorkers: 2}, wantWorkers: 5,
			wantErr: "options.num_workers 5 is more than max_num_workers 2"},
		{name: "count out of bounds", in: JobOptions{NumWorkers: MaxNumWorkers + 1}, wantWorkers: MaxNumWorkers + 1,
			wantErr: "options.num_workers must be between 1 and 1024"},
		{name: "minimum out of bounds", in: JobOptions{MinNumWorkers: MaxNumWorkers + 1}, wantWorkers: MaxNumWorkers + 1,
			wantErr: "options.min_num_workers and max_num_workers must be between 0 and 1024"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.in
			o.EnsureDefaults()
			if o.NumWorkers != tc.wantWorkers {
				t.Errorf("num_workers %d after the defaults, want %d", o.NumWorkers, tc.wantWorkers)
			}
			err := o.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want %q", err, tc.wantErr)
			case tc.wantErr != "" && errcode.Of(err) != errcode.InvalidOptions:
				t.Errorf("error %v has not the code %s", err, errcode.InvalidOptions)
			}
		})
	}
}
