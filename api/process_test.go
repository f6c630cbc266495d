package api

import (
	"context"
	"errors"
	"testing"

	"github.com/weir-dev/weir/errcode"
)

// TestReleaseNotReleasable: a server without WithRelease (weir server)
// refuses to hand its data directory over, with a stable code.
func TestReleaseNotReleasable(t *testing.T) {
	_, c := newTestServer(t)
	res, err := c.Release(context.Background(), ReleaseRequest{Name: "counts", Graph: []byte(`{}`)})
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != errcode.NotReleasable || ae.Status != 409 || res != nil {
		t.Fatalf("Release on a weir server = %+v, %v; want 409 NOT_RELEASABLE", res, err)
	}
}
