package contract

import (
	"context"

	"github.com/weir-dev/weir/mtime"
)

// ReadResult says what one Read call produced.
type ReadResult struct {
	// N is how many elements were written to the buffer.
	N int
	// Watermark is the split's watermark after these elements: no later
	// element will carry an earlier event time (late data excepted). The
	// executor combines the splits' watermarks into the source's (see
	// runner/watermark.go for the rule).
	Watermark mtime.Time
	// Done says the split has ended; its watermark is then +∞.
	Done bool
	// ProcessingTimeAdvanced says the split moved the processing-time clock
	// (TestStream), so timers must be re-evaluated after these elements.
	ProcessingTimeAdvanced bool
}

// Source is the code of a source step.
type Source interface {
	// Split divides the source into at most n parts that workers read
	// independently; a source that cannot split returns one.
	Split(ctx context.Context, n int) ([]SourceSplit, error)
}

// SourceSplit is one independently readable part of a source. Read is
// called repeatedly from one goroutine until it reports Done; it fills buf
// with up to len(buf) elements. A value of type Reject in an element sends
// it to the step's error output. Read may block briefly (an unbounded source
// waiting for data) but must return when ctx is done. Close is called once.
type SourceSplit interface {
	Read(ctx context.Context, buf []Element) (ReadResult, error)
	Close() error
}

// IdleReader is a split whose reads can wait long for input when the
// caller can cut the wait short. The executor calls ReadIdle instead of
// Read when the worker has nothing else to do — the split's last read
// found nothing and it is the worker's only split — with a ctx it cancels
// as soon as the worker has work again (a message, a checkpoint, a drain,
// a processing-time timer). ReadIdle is Read that may block up to the
// split's own long wait (seconds) while nothing is available; when ctx is
// done first it returns ctx's error with nothing read and keeps
// everything in flight for the next read. An idle job then asks its input
// rarely (or is told when input comes) instead of polling continuously.
type IdleReader interface {
	ReadIdle(ctx context.Context, buf []Element) (ReadResult, error)
}

// CatchingUpSplit is implemented by a split that re-reads input an earlier
// job already processed (a replacement job catching up) and must not be cut
// short by a drain while it does. CatchingUp is called between Reads from
// the reading goroutine; while it returns true, a drain keeps reading the
// split as usual (its watermark as Read reports it) before it moves the
// source's watermark to +∞. It must become false by reading alone, also
// when the input it still had to re-read is gone (a Pub/Sub topic's
// retention dropped it): a split that cannot reach the end of its re-read
// ends it and says so, or the drain would never end.
type CatchingUpSplit interface {
	SourceSplit
	CatchingUp() bool
}

// SourceAdopter is a source that takes over in-memory state from the source
// of the same step in the execution it replaces (an in-place update, a
// rescale), so that resuming need not rebuild it from its input: a Pub/Sub
// source's memory of message IDs for de-duplication. The runner calls
// AdoptSource with the old execution's source before Resume, once that
// execution has stopped reading. What is adopted must serve only a split
// that resumes at the very position the old one stopped at (the old
// source may have read past the positions Resume is given); otherwise the
// source rebuilds its state as after a restart.
type SourceAdopter interface {
	Source
	AdoptSource(old Source)
}

// Sink is the code of a sink step. Write is called with each bundle, from
// the worker that produced it (so concurrently across workers), and must not
// keep elems after it returns (the runner reuses the slice); Close is called
// once after all input has been written and must flush everything. A sink
// that can refuse single elements it cannot store implements RejectingSink.
type Sink interface {
	Write(ctx context.Context, worker int, elems []Element) error
	Close(ctx context.Context) error
}

// SinkReject is an element a RejectingSink could not store: its index in
// the bundle passed to WriteRejecting and why.
type SinkReject struct {
	Index int
	Err   ElementError
}

// RejectingSink is a Sink that refuses the single elements it cannot store
// (a null in a key column, a value its column cannot hold) instead of
// failing the bundle. The executor calls WriteRejecting instead of Write:
// the sink stores every element of elems except those it reports, appended
// to rejects (a scratch slice the executor reuses) in the order of elems.
// The executor sends each reported element to the sink step's error output
// when one is declared, else to the dead-letter hook, else fails the run
// naming the step, the reason and the element's source position. An error
// returned fails the run as Write's does.
type RejectingSink interface {
	Sink
	WriteRejecting(ctx context.Context, worker int, elems []Element, rejects []SinkReject) ([]SinkReject, error)
}
