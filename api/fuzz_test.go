package api

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/weir-dev/weir/errcode"

	"github.com/weir-dev/weir/service"
)

// FuzzDecodeRequest: any request body either decodes or is refused with an
// INVALID_REQUEST error — never a panic, never another code.
func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"name": "orders", "pipeline": "pipeline: {}", "base_dir": "/tmp", "options": {"num_workers": 2}}`,
		`{"name": "orders", "transform_name_mapping": "{\"A\": \"B\"}", "validate_only": true}`,
		`{"options": {"num_workers": "two"}}`,
		`{"unknown": 1}`,
		`{"name": "x"} {"name": "y"}`,
		`[]`, `null`, ``, `{`, `{"name": "\u0000"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, dst := range []any{&SubmitRequest{}, &UpdateRequest{}, &OptionsRequest{}} {
			r := httptest.NewRequest("POST", "/v1/jobs", bytes.NewReader(body))
			err := decode(r, dst)
			if err == nil {
				continue
			}
			var se *service.Error
			if !errors.As(err, &se) || se.Code != errcode.InvalidRequest {
				t.Fatalf("decode(%q) = %v, want an INVALID_REQUEST error", body, err)
			}
		}
	})
}
