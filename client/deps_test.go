package client_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestDependencies: a Go program that only talks to a server links the
// client and its wire types, not the server's machinery. The package's
// dependencies outside the standard library are package client itself
// and errcode; in particular none of the heavy ones below.
func TestDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/weir-dev/weir/client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	forbidden := []string{"github.com/cockroachdb/pebble", "github.com/nats-io/nats-server", "github.com/nats-io/nats.go",
		"github.com/google/cel-go", "go.starlark.net", "modernc.org/sqlite", "google.golang.org/grpc",
		"github.com/prometheus/", "github.com/weir-dev/weir/service", "github.com/weir-dev/weir/api"}
	allowed := map[string]bool{"github.com/weir-dev/weir/client": true, "github.com/weir-dev/weir/errcode": true}
	for _, d := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(d, f) {
				t.Errorf("package client depends on %s (through %s), which a client must not link", f, d)
			}
		}
		if !allowed[d] {
			t.Errorf("package client depends on %s: only errcode and the standard library are allowed", d)
		}
	}
	if len(deps) != 2 {
		t.Errorf("go list -deps of package client gave %q, want the client and errcode", deps)
	}
}
