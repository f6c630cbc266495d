package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/compat"
	"github.com/weir-dev/weir/errcode"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/service"
	"github.com/weir-dev/weir/service/record"
)

// The replies as the API wrote them before it had wire types of its own:
// the service's records inside the API's envelopes. The JSON of the wire
// types must stay byte for byte theirs (the console, `--format json` and
// every client read it).
type (
	oldJobList struct {
		Jobs []record.Summary `json:"jobs"`
	}
	oldSubmitResponse struct {
		ID          string          `json:"id"`
		Name        string          `json:"name"`
		State       record.JobState `json:"state"`
		Error       string          `json:"error,omitempty"`
		Replacement string          `json:"replacement,omitempty"`
	}
	oldUpdateResponse struct {
		Report           compat.Report             `json:"report"`
		Job              *oldSubmitResponse        `json:"job,omitempty"`
		Replaced         *record.Summary           `json:"replaced,omitempty"`
		PauseMS          int64                     `json:"pause_ms,omitempty"`
		Options          *record.JobOptions        `json:"options,omitempty"`
		OptionsChanged   []record.OptionChange     `json:"options_changed,omitempty"`
		Notes            []string                  `json:"notes,omitempty"`
		Graph            json.RawMessage           `json:"graph,omitempty"`
		RenderedPipeline string                    `json:"rendered_pipeline,omitempty"`
		SourcePositions  []service.SourcePlacement `json:"source_positions,omitempty"`
		Error            *ErrorDetail              `json:"error,omitempty"`
	}
	oldHistoryResponse struct {
		Name        string                      `json:"name"`
		Jobs        []*record.Job               `json:"jobs"`
		Attempts    []service.Attempt           `json:"attempts"`
		Generations []service.GenerationHistory `json:"generations"`
	}
	oldRollbackResponse struct {
		service.RollbackResult
		Error *ErrorDetail `json:"error,omitempty"`
	}
	oldReleaseResponse struct {
		Report   *compat.Report  `json:"report,omitempty"`
		Replaced *record.Summary `json:"replaced,omitempty"`
		Released bool            `json:"released"`
		Error    *ErrorDetail    `json:"error,omitempty"`
	}
	oldEventList struct {
		JobID  string         `json:"job_id"`
		Events []record.Event `json:"events"`
	}
	oldSnapshotList struct {
		Snapshots []*record.Snapshot `json:"snapshots"`
	}
	oldImportResponse struct {
		UploadID string           `json:"upload_id"`
		Received int64            `json:"received_bytes"`
		Snapshot *record.Snapshot `json:"snapshot,omitempty"`
	}
	oldSubscriptionSnapshotList struct {
		Snapshots []pubsub.SubscriptionSnapshot `json:"snapshots"`
	}
	oldSubmitRequest struct {
		Name           string            `json:"name"`
		Pipeline       string            `json:"pipeline"`
		PipelineFile   string            `json:"pipeline_file,omitempty"`
		BaseDir        string            `json:"base_dir"`
		Options        record.JobOptions `json:"options"`
		ServiceOptions []string          `json:"service_options,omitempty"`
		RequestID      string            `json:"request_id,omitempty"`
	}
	oldUpdateRequest struct {
		oldSubmitRequest
		TransformNameMapping string         `json:"transform_name_mapping,omitempty"`
		AllowSourceChange    bool           `json:"allow_source_change,omitempty"`
		ValidateOnly         bool           `json:"validate_only,omitempty"`
		JinjaVariables       map[string]any `json:"jinja_variables,omitempty"`
	}
	oldFromSnapshotRequest struct {
		oldSubmitRequest
		SnapshotID           string `json:"snapshot_id"`
		TransformNameMapping string `json:"transform_name_mapping,omitempty"`
		AllowSourceChange    bool   `json:"allow_source_change,omitempty"`
	}
	oldOptionsRequest struct {
		Options record.JobOptions `json:"options"`
	}
)

// filler sets every field of a value, recursively, to a value of its own
// (numbers counting up, so that two fields never look alike), to show
// that each one crosses the edge. With empty, slices and maps are empty
// rather than holding elements.
type filler struct {
	n     int
	empty bool
}

var (
	timeType     = reflect.TypeOf(time.Time{})
	rawType      = reflect.TypeOf(json.RawMessage{})
	jobStateType = reflect.TypeOf(record.JobState(0))
	codeType     = reflect.TypeOf(errcode.Code(""))
	anyType      = reflect.TypeOf((*any)(nil)).Elem()
)

func (f *filler) fill(v reflect.Value, depth int) {
	f.n++
	n := f.n
	t := v.Type()
	switch {
	case t == timeType:
		loc := time.FixedZone("test", 3600)
		v.Set(reflect.ValueOf(time.Date(2026, 12, 1, 10, 0, n%60, n*1000+7, loc)))
		return
	case t == rawType:
		v.SetBytes([]byte(`{"graph": [1, 2], "n": ` + string(rune('0'+n%10)) + `}`))
		return
	case t == jobStateType:
		states := record.AllStates()
		v.SetInt(int64(states[n%len(states)]))
		return
	case t == codeType:
		v.SetString(string(errcode.Internal))
		return
	case t == anyType:
		v.Set(reflect.ValueOf(map[string]any{"k": "v", "n": float64(n)}))
		return
	}
	switch t.Kind() {
	case reflect.String:
		v.SetString(t.Name() + "-" + string(rune('a'+n%26)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(n) + 0.25)
	case reflect.Pointer:
		if depth > 4 {
			return
		}
		p := reflect.New(t.Elem())
		f.fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if t.Field(i).IsExported() {
				f.fill(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(t, 0, 2)
		if !f.empty && depth <= 4 {
			for range 2 {
				e := reflect.New(t.Elem()).Elem()
				f.fill(e, depth+1)
				s = reflect.Append(s, e)
			}
		}
		v.Set(s)
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			f.fill(v.Index(i), depth+1)
		}
	case reflect.Map:
		m := reflect.MakeMap(t)
		if !f.empty && depth <= 4 {
			for range 2 {
				k, e := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
				f.fill(k, depth+1)
				f.fill(e, depth+1)
				m.SetMapIndex(k, e)
			}
		}
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf("x"))
	}
}

// wireCase is one reply (or request) type: its value as the API wrote it
// before, and the wire value the API writes now.
type wireCase struct {
	name string
	old  func(f *filler) any // a filled old value (a pointer)
	wire func(old any) any   // the wire value of it
	into func() any          // a new wire value to decode into (a pointer)
}

func oldOf[T any](f *filler) *T {
	var v T
	if f != nil {
		f.fill(reflect.ValueOf(&v).Elem(), 0)
	}
	return &v
}

func wireCases() []wireCase {
	sr := func(o *oldSubmitResponse) *SubmitResponse {
		if o == nil {
			return nil
		}
		return &SubmitResponse{ID: o.ID, Name: o.Name, State: wireState(o.State), Error: o.Error, Replacement: o.Replacement}
	}
	sub := func(o oldSubmitRequest) SubmitRequest {
		return SubmitRequest{Name: o.Name, Pipeline: o.Pipeline, PipelineFile: o.PipelineFile, BaseDir: o.BaseDir,
			Options: wireJobOptions(o.Options), ServiceOptions: o.ServiceOptions, RequestID: o.RequestID}
	}
	return []wireCase{
		{"job", func(f *filler) any { return oldOf[record.Job](f) },
			func(o any) any { return wireJob(*o.(*record.Job)) }, func() any { return new(client.Job) }},
		{"job list", func(f *filler) any { return oldOf[oldJobList](f) },
			func(o any) any {
				return JobList{Jobs: wireSlice(o.(*oldJobList).Jobs, wireSummary)}
			}, func() any { return new(JobList) }},
		{"summary", func(f *filler) any { return oldOf[record.Summary](f) },
			func(o any) any { return wireSummary(*o.(*record.Summary)) }, func() any { return new(client.Summary) }},
		{"submit response", func(f *filler) any { return oldOf[oldSubmitResponse](f) },
			func(o any) any { return sr(o.(*oldSubmitResponse)) }, func() any { return new(SubmitResponse) }},
		{"update response", func(f *filler) any { return oldOf[oldUpdateResponse](f) },
			func(o any) any {
				u := o.(*oldUpdateResponse)
				return UpdateResponse{Report: wireCompatReport(u.Report), Job: sr(u.Job), Replaced: wirePtr(u.Replaced, wireSummary),
					PauseMS: u.PauseMS, Options: wirePtr(u.Options, wireJobOptions), OptionsChanged: wireSlice(u.OptionsChanged, wireOptionChange),
					Notes: u.Notes, Graph: u.Graph, RenderedPipeline: u.RenderedPipeline,
					SourcePositions: wireSlice(u.SourcePositions, wireSourcePlacement), Error: u.Error}
			}, func() any { return new(UpdateResponse) }},
		{"history response", func(f *filler) any { return oldOf[oldHistoryResponse](f) },
			func(o any) any {
				h := o.(*oldHistoryResponse)
				return HistoryResponse{Name: h.Name, Jobs: wireSlice(h.Jobs, wireJobPtr), Attempts: wireSlice(h.Attempts, wireAttempt),
					Generations: wireSlice(h.Generations, wireGenerationHistory)}
			}, func() any { return new(HistoryResponse) }},
		{"rollback response", func(f *filler) any { return oldOf[oldRollbackResponse](f) },
			func(o any) any {
				r := o.(*oldRollbackResponse)
				return RollbackResponse{RollbackResult: wireRollbackResult(r.RollbackResult), Error: r.Error}
			}, func() any { return new(RollbackResponse) }},
		{"release response", func(f *filler) any { return oldOf[oldReleaseResponse](f) },
			func(o any) any {
				r := o.(*oldReleaseResponse)
				return ReleaseResponse{Report: wirePtr(r.Report, wireCompatReport), Replaced: wirePtr(r.Replaced, wireSummary), Released: r.Released, Error: r.Error}
			}, func() any { return new(ReleaseResponse) }},
		{"event list", func(f *filler) any { return oldOf[oldEventList](f) },
			func(o any) any {
				e := o.(*oldEventList)
				return EventList{JobID: e.JobID, Events: wireSlice(e.Events, wireEvent)}
			}, func() any { return new(EventList) }},
		{"event", func(f *filler) any { return oldOf[record.Event](f) },
			func(o any) any { return wireEvent(*o.(*record.Event)) }, func() any { return new(client.Event) }},
		{"metrics history", func(f *filler) any { return oldOf[service.History](f) },
			func(o any) any { return wireMetricsHistory(*o.(*service.History)) }, func() any { return new(client.MetricsHistory) }},
		{"snapshot", func(f *filler) any { return oldOf[record.Snapshot](f) },
			func(o any) any { return wireSnapshot(*o.(*record.Snapshot)) }, func() any { return new(client.Snapshot) }},
		{"snapshot list", func(f *filler) any { return oldOf[oldSnapshotList](f) },
			func(o any) any {
				return SnapshotList{Snapshots: wireSlice(o.(*oldSnapshotList).Snapshots, wireSnapshotPtr)}
			},
			func() any { return new(SnapshotList) }},
		{"import response", func(f *filler) any { return oldOf[oldImportResponse](f) },
			func(o any) any {
				r := o.(*oldImportResponse)
				return ImportResponse{UploadID: r.UploadID, Received: r.Received, Snapshot: wireSnapshotPtr(r.Snapshot)}
			}, func() any { return new(ImportResponse) }},
		{"subscription snapshot", func(f *filler) any { return oldOf[pubsub.SubscriptionSnapshot](f) },
			func(o any) any { return wireSubscriptionSnapshot(*o.(*pubsub.SubscriptionSnapshot)) }, func() any { return new(client.SubscriptionSnapshot) }},
		{"subscription snapshot list", func(f *filler) any { return oldOf[oldSubscriptionSnapshotList](f) },
			func(o any) any {
				return SubscriptionSnapshotList{Snapshots: wireSlice(o.(*oldSubscriptionSnapshotList).Snapshots, wireSubscriptionSnapshot)}
			}, func() any { return new(SubscriptionSnapshotList) }},
		{"seek result", func(f *filler) any { return oldOf[pubsub.SeekResult](f) },
			func(o any) any { return wireSeekResult(*o.(*pubsub.SeekResult)) }, func() any { return new(client.SeekResult) }},
		{"compatibility report", func(f *filler) any { return oldOf[compat.Report](f) },
			func(o any) any { return wireCompatReport(*o.(*compat.Report)) }, func() any { return new(client.CompatReport) }},
		{"submit request", func(f *filler) any { return oldOf[oldSubmitRequest](f) },
			func(o any) any { return sub(*o.(*oldSubmitRequest)) }, func() any { return new(SubmitRequest) }},
		{"update request", func(f *filler) any { return oldOf[oldUpdateRequest](f) },
			func(o any) any {
				u := o.(*oldUpdateRequest)
				return UpdateRequest{SubmitRequest: sub(u.oldSubmitRequest), TransformNameMapping: u.TransformNameMapping,
					AllowSourceChange: u.AllowSourceChange, ValidateOnly: u.ValidateOnly, JinjaVariables: u.JinjaVariables}
			}, func() any { return new(UpdateRequest) }},
		{"create from snapshot request", func(f *filler) any { return oldOf[oldFromSnapshotRequest](f) },
			func(o any) any {
				u := o.(*oldFromSnapshotRequest)
				return FromSnapshotRequest{SubmitRequest: sub(u.oldSubmitRequest), SnapshotID: u.SnapshotID,
					TransformNameMapping: u.TransformNameMapping, AllowSourceChange: u.AllowSourceChange}
			}, func() any { return new(FromSnapshotRequest) }},
		{"options request", func(f *filler) any { return oldOf[oldOptionsRequest](f) },
			func(o any) any { return OptionsRequest{Options: wireJobOptions(o.(*oldOptionsRequest).Options)} },
			func() any { return new(OptionsRequest) }},
	}
}

// TestWireJSONIdentical: every reply the API converts to a wire type is,
// byte for byte, the JSON it wrote when it sent the service's records
// themselves (field names, their order, omitempty, null against []), with
// every field set, with empty lists and maps, and with none set; and a
// client that decodes a reply into the wire type and encodes it again
// (`--format json`) writes the same bytes, refusing no field.
func TestWireJSONIdentical(t *testing.T) {
	variants := []struct {
		name string
		f    func() *filler
	}{
		{"every field set", func() *filler { return &filler{} }},
		{"empty lists and maps", func() *filler { return &filler{empty: true} }},
		{"zero", func() *filler { return nil }},
	}
	for _, c := range wireCases() {
		for _, v := range variants {
			t.Run(c.name+"/"+v.name, func(t *testing.T) {
				old := c.old(v.f())
				want, err := json.MarshalIndent(old, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				got, err := json.MarshalIndent(c.wire(old), "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("the wire type's JSON differs from the record's\n got: %s\nwant: %s", got, want)
				}
				into := c.into()
				dec := json.NewDecoder(bytes.NewReader(want))
				dec.DisallowUnknownFields()
				if err := dec.Decode(into); err != nil {
					t.Fatalf("a client cannot decode the reply into %T: %v", into, err)
				}
				again, err := json.MarshalIndent(into, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(again, want) {
					t.Fatalf("decoded and encoded again by a client, the reply changes\n got: %s\nwant: %s", again, want)
				}
			})
		}
	}
}

// TestWireConstants: the client's names of states, phases and event types
// are the service's, and a state is terminal for both or neither.
func TestWireConstants(t *testing.T) {
	states := []client.JobState{client.StatePending, client.StateRunning, client.StateDone, client.StateDraining, client.StateDrained,
		client.StateCancelling, client.StateCancelled, client.StateUpdated, client.StateFailed}
	for i, s := range record.AllStates() {
		if i >= len(states) || states[i] != wireState(s) {
			t.Fatalf("service state %s has no client twin in %v", s, states)
		}
		if states[i].Terminal() != s.Terminal() || states[i].Title() != s.Title() {
			t.Errorf("state %s: client Terminal %v Title %q, service %v %q", s, states[i].Terminal(), states[i].Title(), s.Terminal(), s.Title())
		}
	}
	if len(states) != len(record.AllStates()) {
		t.Errorf("the client has %d states, the service %d", len(states), len(record.AllStates()))
	}
	events := []client.EventType{client.EventStateChanged, client.EventConditionChanged, client.EventCheckpointFailed,
		client.EventDeadLetter, client.EventUpdateRefused, client.EventUpdateValidated, client.EventUpdateSucceeded,
		client.EventUpdateFailed, client.EventRescaleSucceeded, client.EventRescaleFailed, client.EventAutoscaled, client.EventReplacementPhase, client.EventParityGate,
		client.EventSnapshotCreated, client.EventSnapshotFailed, client.EventRecovered, client.EventCatchUpExpired, client.EventLog, client.EventTableMerged, client.EventSinkBackpressure}
	var svcEvents []client.EventType
	for _, e := range record.EventTypes() {
		svcEvents = append(svcEvents, client.EventType(e.Type))
	}
	if !slices.Equal(events, svcEvents) {
		t.Errorf("client event types %v, service %v", events, svcEvents)
	}
	phases := map[client.ReplacementPhase]record.ReplacementPhase{
		client.PhasePreparing: record.PhasePreparing, client.PhaseDrainingOld: record.PhaseDrainingOld,
		client.PhaseOverlap: record.PhaseOverlap, client.PhaseCutOver: record.PhaseCutOver,
		client.PhaseRolledBack: record.PhaseRolledBack, client.PhaseFailed: record.PhaseFailed,
	}
	for c, s := range phases {
		if string(c) != string(s) || c.Final() != s.Final() {
			t.Errorf("phase %s: client %s (final %v), service final %v", s, c, c.Final(), s.Final())
		}
	}
	pairs := [][2]string{
		{client.StrategyStopAndReplace, record.StrategyStopAndReplace},
		{client.StrategyParallel, record.StrategyParallel},
		{client.StrategyRollback, record.StrategyRollback},
		{client.HowCreate, service.HowCreate},
		{client.HowCreateFromSnapshot, service.HowCreateFromSnapshot},
		{client.HowInPlaceUpdate, service.HowInPlaceUpdate},
		{client.SDKGo, record.SDKGo},
		{client.SnapshotKindRollback, record.SnapshotKindRollback},
		{client.DeliveryExactlyOnce, record.DeliveryExactlyOnce},
		{client.DeliveryAtLeastOnce, record.DeliveryAtLeastOnce},
		{string(client.SnapshotPending), string(record.SnapshotPending)},
		{string(client.SnapshotRunning), string(record.SnapshotRunning)},
		{string(client.SnapshotReady), string(record.SnapshotReady)},
		{string(client.SnapshotFailed), string(record.SnapshotFailed)},
		{string(client.SnapshotDeleted), string(record.SnapshotDeleted)},
		{string(client.TypeBatch), string(record.TypeBatch)},
		{string(client.TypeStreaming), string(record.TypeStreaming)},
	}
	for _, p := range pairs {
		if c, s := p[0], p[1]; c != s {
			t.Errorf("client constant %q, service %q", c, s)
		}
	}
	if client.MaxRequestBytes != MaxRequestBytes {
		t.Errorf("MaxRequestBytes differs")
	}
}
