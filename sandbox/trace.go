package sandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/weir-dev/weir/mtime"
)

// Event is one entry of a recorded stretch of input: an element read by a
// source, or a move of a source's watermark.
type Event struct {
	// Source names the source step the event belongs to (in the old
	// pipeline's names); empty: the pipeline's only recorded source.
	Source string
	// Value is the element as a JSON object (decoded with UseNumber), or
	// nil for a watermark move.
	Value map[string]any
	// Time is the element's event time.
	Time mtime.Time
	// Watermark, for a watermark move, is the source's new watermark.
	Watermark mtime.Time
	// IsWatermark says the event moves the watermark.
	IsWatermark bool
	// Origin and Offset say where the element was recorded (the events
	// file and its line, a topic and its stream sequence); they become the
	// element's source position, so rejects of the same element are
	// matched across runs.
	Origin string
	Offset int64
}

// Trace is a recorded stretch of input: elements and watermark moves in
// the order they were read. Every run of a rehearsal is fed the same
// trace, so every run sees the same elements and the same watermark holds
// and advances.
type Trace struct {
	Events []Event
}

// Elements counts the trace's elements.
func (t *Trace) Elements() int64 {
	var n int64
	for _, e := range t.Events {
		if !e.IsWatermark {
			n++
		}
	}
	return n
}

// eventLine is one line of an events file.
type eventLine struct {
	Source    string          `json:"source"`
	Element   json.RawMessage `json:"element"`
	EventTime json.RawMessage `json:"event_time"`
	Watermark json.RawMessage `json:"watermark"`
}

// ReadEvents reads an events file: JSON lines, each either an element
//
//	{"element": {...}, "event_time": "2026-03-01T00:01:00Z", "source": "ReadEvents"}
//
// or a watermark move
//
//	{"watermark": "2026-03-01T00:05:00Z", "source": "ReadEvents"}
//
// Times are RFC 3339 strings or integer epoch milliseconds; "source" is
// optional when the pipeline has one recorded source. Watermarks of a
// source must not move back. Without watermark lines a source's
// watermark stays at −∞ until the stretch ends (every window fires once,
// at the end). Blank lines and lines starting with # are skipped. name is
// used in errors and as the elements' source position.
func ReadEvents(r io.Reader, name string) (*Trace, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	t := &Trace{}
	wms := map[string]mtime.Time{}
	line := int64(0)
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		var l eventLine
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return nil, fmt.Errorf("%s:%d: not an event (want {\"element\": {...}, \"event_time\": ...} or {\"watermark\": ...}): %w", name, line, err)
		}
		switch {
		case l.Watermark != nil && l.Element != nil:
			return nil, fmt.Errorf("%s:%d: an event is an element or a watermark move, not both", name, line)
		case l.Watermark != nil:
			wm, err := parseTime(l.Watermark)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: watermark: %w", name, line, err)
			}
			if prev, ok := wms[l.Source]; ok && wm < prev {
				return nil, fmt.Errorf("%s:%d: the watermark of source %q moves back from %s to %s", name, line, l.Source, prev, wm)
			}
			wms[l.Source] = wm
			t.Events = append(t.Events, Event{Source: l.Source, Watermark: wm, IsWatermark: true, Origin: name, Offset: line})
		case l.Element != nil:
			if l.EventTime == nil {
				return nil, fmt.Errorf("%s:%d: an element needs its event_time", name, line)
			}
			ts, err := parseTime(l.EventTime)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: event_time: %w", name, line, err)
			}
			dec := json.NewDecoder(bytes.NewReader(l.Element))
			dec.UseNumber()
			var v map[string]any
			if err := dec.Decode(&v); err != nil || v == nil {
				return nil, fmt.Errorf("%s:%d: element must be a JSON object (got %s)", name, line, short(l.Element))
			}
			t.Events = append(t.Events, Event{Source: l.Source, Value: v, Time: ts, Origin: name, Offset: line})
		default:
			return nil, fmt.Errorf("%s:%d: an event needs \"element\" (with \"event_time\") or \"watermark\"", name, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading events file %s: %w", name, err)
	}
	return t, nil
}

// parseTime reads an RFC 3339 string or integer epoch milliseconds.
func parseTime(raw json.RawMessage) (mtime.Time, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return mtime.Parse(s)
	}
	var ms int64
	if err := json.Unmarshal(raw, &ms); err == nil {
		return mtime.Time(ms), nil
	}
	return 0, fmt.Errorf("%s is neither an RFC 3339 string nor epoch milliseconds", short(raw))
}

func short(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	if s == "" {
		return "nothing"
	}
	return s
}
