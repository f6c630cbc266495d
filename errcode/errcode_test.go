package errcode

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// TestRegistry: every registered code has a kind, an area and an HTTP
// status that fit together, and no code string is registered twice.
func TestRegistry(t *testing.T) {
	shape := regexp.MustCompile(`^[A-Z]+(_[A-Z]+)*$`)
	seen := map[Code]bool{}
	for _, in := range All() {
		t.Run(string(in.Code), func(t *testing.T) {
			if seen[in.Code] {
				t.Errorf("%s is registered twice", in.Code)
			}
			seen[in.Code] = true
			if !shape.MatchString(string(in.Code)) {
				t.Errorf("%q is not an upper-case code", in.Code)
			}
			if in.Area < AreaService || in.Area > AreaCompat {
				t.Errorf("%s has no area (%d)", in.Code, in.Area)
			}
			if in.Kind < KindInvalid || in.Kind > KindDenied {
				t.Errorf("%s has no kind (%d)", in.Code, in.Kind)
			}
			if http.StatusText(in.Status) == "" {
				t.Errorf("%s has no HTTP status (%d)", in.Code, in.Status)
			}
			want := map[Kind][]int{
				KindInvalid:     {http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType},
				KindNotFound:    {http.StatusNotFound},
				KindConflict:    {http.StatusConflict},
				KindUnavailable: {http.StatusServiceUnavailable, http.StatusTooManyRequests},
				KindInternal:    {http.StatusInternalServerError},
				KindWarning:     {http.StatusOK},
				KindDenied:      {http.StatusUnauthorized, http.StatusForbidden},
			}[in.Kind]
			ok := false
			for _, s := range want {
				ok = ok || s == in.Status
			}
			if !ok {
				t.Errorf("%s: kind %s with status %d, want one of %v", in.Code, in.Kind, in.Status, want)
			}
			if got := in.Code.Kind(); got != in.Kind {
				t.Errorf("%s.Kind() = %s, want %s", in.Code, got, in.Kind)
			}
			if got := in.Code.Status(); got != in.Status {
				t.Errorf("%s.Status() = %d, want %d", in.Code, got, in.Status)
			}
			if got, ok := Lookup(in.Code); !ok || got != in {
				t.Errorf("Lookup(%s) = %+v, %v", in.Code, got, ok)
			}
		})
	}
	for _, a := range []Area{AreaService, AreaPubSub, AreaCompat} {
		if len(CodesOf(a)) == 0 {
			t.Errorf("area %d has no codes", a)
		}
	}
}

// TestUnregistered: a code nobody registered is internal, 500.
func TestUnregistered(t *testing.T) {
	c := Code("NO_SUCH_CODE")
	if _, ok := Lookup(c); ok {
		t.Fatal("NO_SUCH_CODE is registered")
	}
	if c.Kind() != KindInternal || c.Status() != http.StatusInternalServerError {
		t.Errorf("unregistered code: kind %s status %d, want internal 500", c.Kind(), c.Status())
	}
}

// TestKnownCodes pins some strings users and tests see, one per family
// and kind: a code, once published, never changes.
func TestKnownCodes(t *testing.T) {
	for c, want := range map[Code]string{
		JobNotFound:         "JOB_NOT_FOUND",
		MethodNotAllowed:    "METHOD_NOT_ALLOWED",
		IncompatibleUpdate:  "INCOMPATIBLE_UPDATE",
		JobAlreadyUpdated:   "JOB_ALREADY_UPDATED",
		TopicNotFound:       "TOPIC_NOT_FOUND",
		PubSubUnavailable:   "PUBSUB_UNAVAILABLE",
		StepMissing:         "STEP_MISSING",
		StateDropped:        "STATE_DROPPED",
		MappingUnknownStep:  "MAPPING_UNKNOWN_STEP",
		WindowParamsChanged: "WINDOW_PARAMS_CHANGED",
		SourceNotRereadable: "SOURCE_NOT_REREADABLE",
	} {
		if string(c) != want {
			t.Errorf("code %q, want %q", c, want)
		}
	}
}

// TestDocsTable: the code table of docs/JOBS.md lists every code of the
// service and the Pub/Sub routes with the status the registry gives it.
func TestDocsTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "JOBS.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([A-Z_]+)` \\| ([0-9]{3}) \\|")
	documented := map[Code]int{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		status, _ := strconv.Atoi(m[2])
		documented[Code(m[1])] = status
	}
	for _, in := range All() {
		if in.Area == AreaCompat {
			continue // compat's findings are documented in its package doc
		}
		got, ok := documented[in.Code]
		switch {
		case !ok:
			t.Errorf("docs/JOBS.md does not list %s", in.Code)
		case got != in.Status:
			t.Errorf("docs/JOBS.md gives %s status %d, the registry %d", in.Code, got, in.Status)
		}
		delete(documented, in.Code)
	}
	for c := range documented {
		t.Errorf("docs/JOBS.md lists %s, which is not registered", c)
	}
}
