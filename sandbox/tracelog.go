package sandbox

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir/io/files"
	"github.com/weir-dev/weir/io/pubsub"
	"github.com/weir-dev/weir/mtime"
)

// This file keeps a trace's events encoded in a log rather than as Go
// values: a recorded stretch of a million Pub/Sub messages held as
// []Event and []pubsub.Message took about 400 MB. Encoded, an event
// costs its bytes (the payload, its ID and a few varints; source, origin
// and topic names are interned) plus 16 bytes of index, and once the log
// passes its memory budget, its older chunks move to an unlinked
// temporary file (gone with the process, even after kill -9): a stretch
// longer than memory rehearses from disk.

// DefaultTraceMemory is the memory budget of a trace's encoded events
// when Trace.MaxMemory is not set: beyond it, older chunks spill to disk.
const DefaultTraceMemory = 256 << 20

// traceChunkSize is the size of one chunk of the log; an event larger
// than it gets a chunk of its own.
const traceChunkSize = 1 << 20

// Event flags in the encoding.
const (
	evWatermark = 1 << iota
	evMessage
	evValue
	evSeenOnly
)

// traceChunk is one chunk of the log: in memory (mem) or, once spilled,
// at off in the spill file.
type traceChunk struct {
	mem  []byte
	off  int64
	size int
}

// evRef locates one encoded event: its chunk, its offset in the chunk and
// its length.
type evRef struct {
	chunk uint32
	len   uint32
	off   uint32
}

// traceLog is a trace's encoded events. Appends come from one goroutine
// while the trace is recorded; reads may come from several at once
// afterwards (RunAll). mu orders reads against appends and spills until
// the log is sealed; a sealed log takes no append, and its reads take no
// lock.
type traceLog struct {
	sealed atomic.Bool
	mu     sync.RWMutex
	chunks []traceChunk
	refs   []evRef
	// inMem is the bytes of the chunks still in memory; budget the most
	// it may reach before older chunks spill (0: DefaultTraceMemory).
	inMem  int64
	budget int64
	dir    string
	file   *os.File
	fileSz int64
	// names interns source, origin and topic names.
	names  []string
	nameID map[string]uint64
	enc    []byte
	// chunk is the chunk size (0: traceChunkSize; tests make it small).
	chunk int
}

// name returns the intern ID of s.
func (l *traceLog) name(s string) uint64 {
	if id, ok := l.nameID[s]; ok {
		return id
	}
	if l.nameID == nil {
		l.nameID = map[string]uint64{}
	}
	id := uint64(len(l.names))
	l.names = append(l.names, s)
	l.nameID[s] = id
	return id
}

// seal ends the appends: the runs read the log from now on.
func (l *traceLog) seal() { l.sealed.Store(true) }

// append encodes ev at the end of the log.
func (l *traceLog) append(ev *Event) error {
	if l.sealed.Load() {
		return errors.New("the recorded stretch is being replayed: no event can be added")
	}
	b := l.enc[:0]
	var flags byte
	if ev.IsWatermark {
		flags |= evWatermark
	}
	if ev.Message != nil {
		flags |= evMessage
	}
	if ev.Value != nil {
		flags |= evValue
	}
	if ev.SeenOnly {
		flags |= evSeenOnly
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, l.name(ev.Source))
	b = binary.AppendUvarint(b, l.name(ev.Origin))
	b = binary.AppendVarint(b, ev.Offset)
	b = binary.AppendVarint(b, int64(ev.Time))
	b = binary.AppendVarint(b, int64(ev.Watermark))
	if ev.Value != nil {
		v, err := json.Marshal(ev.Value)
		if err != nil {
			return fmt.Errorf("recording an element of %s:%d: %w", ev.Origin, ev.Offset, err)
		}
		b = appendBytes(b, v)
	}
	if m := ev.Message; m != nil {
		b = binary.AppendUvarint(b, l.name(m.Topic))
		b = appendBytes(b, m.Data)
		b = appendBytes(b, []byte(m.ID))
		b = binary.AppendUvarint(b, m.Sequence)
		b = binary.AppendUvarint(b, m.NumDelivered)
		pt := int64(0)
		if !m.PublishTime.IsZero() {
			pt = m.PublishTime.UnixNano()
		}
		b = binary.AppendVarint(b, pt)
		b = binary.AppendUvarint(b, uint64(len(m.Attributes)))
		for k, v := range m.Attributes {
			b = appendBytes(b, []byte(k))
			b = appendBytes(b, []byte(v))
		}
	}
	l.enc = b
	if len(b) > 1<<31 {
		return fmt.Errorf("recording %s:%d: an event of %d bytes is too large", ev.Origin, ev.Offset, len(b))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	last := len(l.chunks) - 1
	if last < 0 || l.chunks[last].mem == nil || cap(l.chunks[last].mem)-len(l.chunks[last].mem) < len(b) {
		size := l.chunk
		if size == 0 {
			size = traceChunkSize
		}
		l.chunks = append(l.chunks, traceChunk{mem: make([]byte, 0, max(size, len(b)))})
		last++
		if err := l.spillLocked(); err != nil {
			return err
		}
	}
	c := &l.chunks[last]
	l.refs = append(l.refs, evRef{chunk: uint32(last), off: uint32(len(c.mem)), len: uint32(len(b))})
	c.mem = append(c.mem, b...)
	c.size = len(c.mem)
	l.inMem += int64(len(b))
	return nil
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// spillLocked writes the full chunks in memory (all but the last) to the
// spill file while the log is over its budget. l.mu is held.
func (l *traceLog) spillLocked() error {
	budget := l.budget
	if budget == 0 {
		budget = DefaultTraceMemory
	}
	for i := range len(l.chunks) - 1 {
		if l.inMem <= budget {
			return nil
		}
		c := &l.chunks[i]
		if c.mem == nil {
			continue
		}
		if l.file == nil {
			f, err := os.CreateTemp(l.dir, "weir-trace-*")
			if err != nil {
				return fmt.Errorf("the recorded stretch is over its memory budget (%s) and cannot spill to disk: %w", budgetText(budget), err)
			}
			// Unlinked at once: the file goes with the process, however it ends.
			if err := os.Remove(f.Name()); err != nil {
				f.Close()
				return fmt.Errorf("spilling the recorded stretch: %w", err)
			}
			l.file = f
		}
		if _, err := l.file.WriteAt(c.mem, l.fileSz); err != nil {
			return fmt.Errorf("spilling the recorded stretch to disk: %w", err)
		}
		c.off, c.size = l.fileSz, len(c.mem)
		l.fileSz += int64(len(c.mem))
		l.inMem -= int64(len(c.mem))
		c.mem = nil
	}
	return nil
}

// budgetText words a memory budget: whole MiB as such, else bytes.
func budgetText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// len returns the number of events.
func (l *traceLog) len() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.refs)
}

// event decodes event i. buf is scratch space for a spilled event; the
// returned one is to pass again.
func (l *traceLog) event(i int, buf []byte) (Event, []byte, error) {
	return l.eventInto(i, buf, nil)
}

// eventInto is event, decoding a message into m when m is not nil (the
// event's Message then points to m).
func (l *traceLog) eventInto(i int, buf []byte, m *pubsub.Message) (Event, []byte, error) {
	b, buf, spilled, err := l.raw(i, buf)
	if err != nil {
		return Event{}, buf, err
	}
	ev, _, err := decodeEvent(b, l.namesNow(), spilled, m, false)
	return ev, buf, err
}

// head decodes event i but for its value and message; hasMessage says
// whether it holds a message.
func (l *traceLog) head(i int, buf []byte) (ev Event, hasMessage bool, nbuf []byte, err error) {
	b, buf, _, err := l.raw(i, buf)
	if err != nil {
		return Event{}, false, buf, err
	}
	ev, hasMessage, err = decodeEvent(b, l.namesNow(), false, nil, true)
	return ev, hasMessage, buf, err
}

// namesNow returns the interned names.
func (l *traceLog) namesNow() []string {
	if l.sealed.Load() {
		return l.names
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.names
}

// raw returns the encoded bytes of event i: in its chunk, or read into
// buf when spilled.
func (l *traceLog) raw(i int, buf []byte) (b, nbuf []byte, spilled bool, err error) {
	var (
		r evRef
		c traceChunk
		f *os.File
	)
	if l.sealed.Load() {
		r = l.refs[i]
		c = l.chunks[r.chunk]
		f = l.file
	} else {
		l.mu.RLock()
		r = l.refs[i]
		c = l.chunks[r.chunk]
		f = l.file
		l.mu.RUnlock()
	}
	if c.mem != nil {
		return c.mem[r.off : r.off+r.len : r.off+r.len], buf, false, nil
	}
	if f == nil {
		return nil, buf, true, errors.New("the recorded stretch was closed")
	}
	if cap(buf) < int(r.len) {
		buf = make([]byte, r.len)
	}
	buf = buf[:r.len]
	if _, err := f.ReadAt(buf, c.off+int64(r.off)); err != nil {
		return nil, buf, true, fmt.Errorf("reading the recorded stretch back from disk: %w", err)
	}
	return buf, buf, true, nil
}

// errCorruptTrace is a log entry that does not decode.
var errCorruptTrace = errors.New("a recorded event does not decode")

// traceReader reads the fields of one encoded event.
type traceReader struct {
	b   []byte
	err error
}

func (r *traceReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errCorruptTrace
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *traceReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errCorruptTrace
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *traceReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil || uint64(len(r.b)) < n {
		r.err = errCorruptTrace
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *traceReader) name(names []string) string {
	id := r.uvarint()
	if r.err != nil || id >= uint64(len(names)) {
		r.err = errCorruptTrace
		return ""
	}
	return names[id]
}

// decodeEvent decodes what traceLog.append encoded. With copyData the
// payload is copied (b is a reused buffer); otherwise it aliases b, which
// the log never changes. A message is decoded into m when m is not nil.
// With headOnly the value and the message are left out; hasMessage says
// whether the event holds a message.
func decodeEvent(b []byte, names []string, copyData bool, m *pubsub.Message, headOnly bool) (ev Event, hasMessage bool, err error) {
	if len(b) == 0 {
		return Event{}, false, errCorruptTrace
	}
	flags := b[0]
	hasMessage = flags&evMessage != 0
	r := traceReader{b: b[1:]}
	ev.IsWatermark = flags&evWatermark != 0
	ev.SeenOnly = flags&evSeenOnly != 0
	ev.Source = r.name(names)
	ev.Origin = r.name(names)
	ev.Offset = r.varint()
	ev.Time = mtime.Time(r.varint())
	ev.Watermark = mtime.Time(r.varint())
	if headOnly {
		return ev, hasMessage, r.err
	}
	if flags&evValue != 0 {
		v := r.bytes()
		if r.err == nil {
			dec := json.NewDecoder(bytes.NewReader(v))
			dec.UseNumber()
			var val map[string]any // not &ev.Value: ev would move to the heap
			if err := dec.Decode(&val); err != nil {
				return Event{}, false, fmt.Errorf("%w: %w", errCorruptTrace, err)
			}
			ev.Value = val
		}
	}
	if flags&evMessage != 0 {
		if m == nil {
			m = &pubsub.Message{}
		} else {
			*m = pubsub.Message{}
		}
		m.Topic = r.name(names)
		m.Data = r.bytes()
		if copyData && m.Data != nil {
			m.Data = bytes.Clone(m.Data)
		}
		m.ID = string(r.bytes())
		m.Sequence = r.uvarint()
		m.NumDelivered = r.uvarint()
		if pt := r.varint(); pt != 0 {
			m.PublishTime = time.Unix(0, pt).UTC()
		}
		if n := r.uvarint(); n > 0 && r.err == nil {
			m.Attributes = make(map[string]string, min(n, 64))
			for range n {
				k := string(r.bytes())
				m.Attributes[k] = string(r.bytes())
				if r.err != nil {
					break
				}
			}
		}
		ev.Message = m
	}
	if r.err != nil {
		return Event{}, false, r.err
	}
	return ev, hasMessage, nil
}

// close releases the spill file.
func (l *traceLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return nil
	}
	err := l.file.Close()
	l.file = nil
	return err
}

// spilled reports how many bytes of the log are on disk.
func (l *traceLog) spilled() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.fileSz
}

// size reports how many bytes the log's events take, in memory and on
// disk.
func (l *traceLog) size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.inMem + l.fileSz
}

// CheckSpillDir reports whether dir can take a trace's spill file
// (Trace.SpillDir): it exists, is a directory, and a file can be created
// in it (one is, and removed at once). The empty dir, the system's
// temporary directory, is not checked.
func CheckSpillDir(dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("directory %s does not exist", dir)
	case err != nil:
		return fmt.Errorf("directory %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	f, err := os.CreateTemp(dir, "weir-trace-check-*")
	if err != nil {
		return fmt.Errorf("no file can be created in directory %s: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("removing the probe file %s: %w", name, err)
	}
	return nil
}

// ParseTraceMemory reads a trace's memory budget (Trace.MaxMemory) from a
// flag's value: a byte size such as 64MiB, 1GiB or 512MB
// (files.ParseByteSize); "" is 0, the default budget. A negative or zero
// size is refused, and every error is worded to follow the flag's name
// and quoted value.
func ParseTraceMemory(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := files.ParseByteSize(s)
	switch {
	case strings.HasPrefix(strings.TrimSpace(s), "-"):
		return 0, errors.New("the budget must not be negative")
	case err != nil:
		return 0, fmt.Errorf("%w (want a byte size such as 64MiB, 1GiB or 512MB)", err)
	case n == 0:
		return 0, fmt.Errorf("the budget must be more than 0 bytes (the default is %.1f MiB)", float64(DefaultTraceMemory)/(1<<20))
	}
	return n, nil
}
