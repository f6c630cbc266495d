package api

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-dev/weir/errcode"
)

// TestAPIRefusalsNameBothClients: a service-option refusal reached
// through the HTTP API says how to submit the request as an update or as
// a new job over HTTP too (it said only "add/drop --update"), with its
// code unchanged.
func TestAPIRefusalsNameBothClients(t *testing.T) {
	dir := t.TempDir()
	st := openStack(t, filepath.Join(dir, "data"), filepath.Join(dir, "broker"))
	ctx := context.Background()
	tests := []struct {
		name   string
		update bool
		opts   []string
		code   errcode.Code
		want   string
	}{
		{"parallel strategy on create", false, []string{"update_strategy_parallel_job_update", "parallel_replace_job_max_stop_duration=1m"},
			errcode.ConflictingServiceOptions, "submit it as an update (weir run --update, or POST /v1/jobs:update)"},
		{"in-place strategy on create", false, []string{"update_strategy_in_place_update"},
			errcode.ConflictingServiceOptions, "POST /v1/jobs:update"},
		{"replacement option on create", false, []string{"parallel_replace_job_cancel_on_drain_timeout=false"},
			errcode.ConflictingServiceOptions, "POST /v1/jobs:update"},
		{"new name on update", true, []string{"parallel_replace_job_name=old", "parallel_replace_job_max_stop_duration=1m"},
			errcode.NoRunningJob, "submit it as a new job (weir run without --update, or POST /v1/jobs)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := SubmitRequest{Name: "orders", Pipeline: ordersPipeline, BaseDir: dir, ServiceOptions: tc.opts}
			var err error
			if tc.update {
				_, err = st.c.Update(ctx, UpdateRequest{SubmitRequest: req})
			} else {
				_, err = st.c.Submit(ctx, req)
			}
			var ae *Error
			if !errors.As(err, &ae) || ae.Code != tc.code || !strings.Contains(ae.Message, tc.want) {
				t.Fatalf("got %v, want %s containing %q", err, tc.code, tc.want)
			}
		})
	}
}
