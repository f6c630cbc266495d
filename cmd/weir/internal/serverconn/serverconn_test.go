package serverconn

import (
	"context"
	"errors"
	"testing"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/errcode"
)

// TestErrorExitCodes: the server's error codes map to the CLI's exit codes
// by their kind; an unreachable server and any other failure have their
// own; nil stays nil.
func TestErrorExitCodes(t *testing.T) {
	c, err := client.NewClient("http://127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"invalid pipeline", &client.Error{Code: errcode.InvalidPipeline, Message: "bad"}, cli.ExitInvalidPipeline},
		{"invalid job name", &client.Error{Code: errcode.InvalidJobName, Message: "bad"}, cli.ExitUsage},
		{"method not allowed", &client.Error{Code: errcode.MethodNotAllowed, Message: "no"}, cli.ExitFailure},
		{"job not found", &client.Error{Code: errcode.JobNotFound, Message: "none"}, cli.ExitFailure},
		{"unreachable", client.ErrUnreachable, cli.ExitServerUnreachable},
		{"other", errors.New("boom"), cli.ExitFailure},
	}
	for _, tt := range tests {
		var ee *cli.ExitError
		got := Error(context.Background(), c, tt.err)
		if !errors.As(got, &ee) || ee.Code != tt.want {
			t.Errorf("%s: %v maps to %+v, want code %d", tt.name, got, ee, tt.want)
		}
	}
	if Error(context.Background(), c, nil) != nil {
		t.Error("a nil error became an error")
	}
}
