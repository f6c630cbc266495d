package contract

import (
	"context"
	"errors"
	"time"

	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/window"
)

// This file declares what the job service's flows ask of a step's code
// beyond running it — capabilities a connector implements and a flow
// finds by a type assertion on the code, so that no flow names a
// connector: a source that re-reads retained input for a replacement job
// and reports its catch-up, a sink that writes only the windows its job
// owns, a SQL sink that writes behind a façade view, and what sources
// report of their input. The job service calls the configuring methods
// (ReRead, OnCatchUpExpired, RestrictWindows) after the pipeline is built
// and before its execution starts, from one goroutine; the reporting ones
// from any goroutine while it runs.

// ErrInputGone says that the input a source reads is gone: deleted under
// it (a Pub/Sub subscription deleted while the job read it). Connectors'
// errors wrap it, so that a job service tells a user how to go on
// without knowing the connector.
var ErrInputGone = errors.New("not found")

// ErrUnavailable says that a service a connector reads or writes cannot
// be reached now but may come back: a broker that is down, reloading its
// streams after a full disk, or out of storage. Connectors' errors wrap
// it, so that a job service keeps the job and runs it again from its last
// checkpoint rather than fail it, without knowing the connector.
var ErrUnavailable = errors.New("unavailable")

// ErrForeignPosition says that a checkpointed source position cannot be
// of the input it is used with: it lies beyond everything the input holds
// (a position taken on another broker, or before the input was deleted
// and created again). Connectors' errors wrap it, so that a job service
// can ask how the position is to be translated without knowing the
// connector.
var ErrForeignPosition = errors.New("the position is not of this input")

// PermanentCommitter is a transactional sink that can tell a commit error
// that retrying cannot fix (the table no longer fits the rows) from one
// that may pass (the database is busy, out of disk).
type PermanentCommitter interface {
	TransactionalSink
	// PermanentCommitError reports whether err, from this sink's commit,
	// is permanent, and why in a few words.
	PermanentCommitError(err error) (reason string, permanent bool)
}

// ReReadingSource is a source the job service can make re-read retained
// input for a replacement job (a Pub/Sub source: from the rewind point of
// the job it replaces, holding its watermark until it has read the old
// job's last message).
type ReReadingSource interface {
	Source
	// ReRead makes the source re-read: its splits reading subscription
	// sub start from starts[sub]; a subscription not in starts is read as
	// usual. Called once, before the execution starts.
	ReRead(starts map[string]RewindStart)
	// CatchUp returns the re-read's progress, or false when the source
	// does not re-read.
	CatchUp() (CatchUp, bool)
	// OnCatchUpExpired makes the source call fn, from its reading
	// goroutine, for each part of the re-read the topic no longer held.
	// Called before the execution starts.
	OnCatchUpExpired(fn func(CatchUpExpired))
	// RewindSkipped returns how many messages the re-read skipped because
	// every window they belong to had expired before the cut.
	RewindSkipped() int64
}

// WindowRestrictedSink is a sink that writes only the windows its job owns
// (the jobs of a parallel replacement share the windows; a re-reading job
// owns only those its re-read makes complete).
type WindowRestrictedSink interface {
	Sink
	// RestrictWindows makes the sink leave out the elements of windows keep
	// refuses, on top of earlier restrictions (each call narrows). Called
	// before the execution starts.
	RestrictWindows(keep func(window.Window) bool)
}

// Restrict returns the window filter of a sink restricted to keep on top
// of prev (nil: every window): a window passes when both accept it.
func Restrict(prev, keep func(window.Window) bool) func(window.Window) bool {
	if prev == nil {
		return keep
	}
	return func(w window.Window) bool { return prev(w) && keep(w) }
}

// FacadeTable names a SQL table that a sink writes, possibly behind a
// façade view: its driver, connection and name.
type FacadeTable struct {
	Driver, DSN, Table string
	// BusyTimeout is how long a SQLite connection waits for a lock; 0 is
	// the sink's default.
	BusyTimeout time.Duration
}

// FacadeSink is a SQL sink that can write its generation's own table
// behind a façade view named like its table (the jobs of a parallel
// replacement do).
type FacadeSink interface {
	Sink
	// FacadeTable names the sink's table.
	FacadeTable() FacadeTable
	// CheckFacadeTable checks, changing nothing, that the table can become
	// (or is) a façade view with the sink's generation behind it.
	CheckFacadeTable(ctx context.Context) error
}

// BacklogReporter is a source that can tell how many elements wait to be
// read (a Pub/Sub subscription's pending messages).
type BacklogReporter interface {
	// BacklogElements returns the number of unread elements, or ok false
	// when it is unknown right now. It must not block for long.
	BacklogElements() (n int64, ok bool)
}

// BacklogBytesReporter is a source that can tell how many bytes wait to be
// read.
type BacklogBytesReporter interface {
	// BacklogBytes returns the size of the unread elements, or ok false
	// when it is unknown right now. It must not block for long.
	BacklogBytes() (n int64, ok bool)
}

// IDConflictReporter is a source that drops messages whose ID it saw
// within its dedupe window (a Pub/Sub source with id_attribute or
// id_field).
type IDConflictReporter interface {
	// DuplicateIDConflicts returns how many of those duplicates carried
	// other data than the first message of their ID.
	DuplicateIDConflicts() int64
}

// MaxEventTimeReporter is a source that tells the newest event time it
// produced (a parallel replacement's cut-over time is read from it).
type MaxEventTimeReporter interface {
	// MaxEventTime returns the newest event time produced, or ok false
	// when none yet.
	MaxEventTime() (t mtime.Time, ok bool)
}

// RewindStart is what a split re-reading a subscription for a replacement
// job needs (SourceConfig.Rewind).
type RewindStart struct {
	// SkipBefore: a message with an event time before it is skipped
	// (counted in RewindSkipped, not emitted, not dead-lettered): every
	// window of the new pipeline it belongs to had expired at the old
	// job's final watermark, whose panes for them are final (the old job
	// would have dropped it as too late).
	SkipBefore mtime.Time `json:"skip_before_ms"`
	// Watermark is the old job's final watermark: once the hold ends the
	// split's watermark is at least this, as the old job's was.
	Watermark mtime.Time `json:"watermark_ms"`
	// HoldUntil is the stream sequence of the last message the old job
	// read: until the split has handled it, its watermark stays at −∞, so
	// no window fires (and nothing is late) while the split catches up;
	// then it is the split's own estimate again, and every window fires
	// with everything the old job had read for it.
	HoldUntil uint64 `json:"hold_until_seq"`
	// FromSeq, when not 0, is the stream sequence the re-read starts at: a
	// split opened without a checkpointed position (the new job's first
	// start, or a restart before its first checkpoint) positions the
	// subscription there itself rather than at its acknowledgement floor,
	// so that nothing that moved the floor after the service's seek (a
	// late acknowledgement, a seek that had not yet taken effect) skips
	// the re-read.
	FromSeq uint64 `json:"from_seq,omitempty"`
}

// CatchUp is the progress of a source re-reading for a replacement job
// (SourceConfig.Rewind).
type CatchUp struct {
	// ReadSeq is the last stream sequence the split handled (0 before it
	// opened).
	ReadSeq uint64
	// HoldUntil is RewindStart.HoldUntil: the last message the old job
	// read.
	HoldUntil uint64
	// Holding is ReadSeq < HoldUntil: the split's watermark is held at −∞
	// and a drain reads on until it is false (contract.CatchingUpSplit).
	Holding bool
	// Expired counts the messages up to HoldUntil the re-read had to read
	// again but the topic no longer held (retention, a message or size
	// limit, a purge): the catch-up went on, or ended, without them
	// (CatchUpExpired).
	Expired uint64
}

// CatchUpExpired says that part of a re-read is gone: the messages of
// stream sequences FirstSeq to LastSeq (at most HoldUntil), which the old
// job had read, are no longer in the topic's retention, so the split
// re-reading for a replacement job went on without them — it stopped
// holding its watermark when nothing up to HoldUntil was left to read
// (otherwise the catch-up, and a drain waiting for it, would never end).
type CatchUpExpired struct {
	Step         string
	Subscription string
	Topic        string
	// FirstSeq and LastSeq bound the sequences that were gone; Messages
	// is LastSeq − FirstSeq + 1.
	FirstSeq, LastSeq, Messages uint64
	// HoldUntil is RewindStart.HoldUntil.
	HoldUntil uint64
	// NextSeq is where the re-read went on: the next message the split
	// read, or, with nothing up to HoldUntil left, the topic's first
	// retained sequence (its next one when it held none).
	NextSeq uint64
}

// InputStarter is a source that can tell where a job's input starts when
// the job begins with no state (not restored from a checkpoint or a
// snapshot, not handed state by an update, not re-reading for a
// replacement) from a position past input it will never read: a Pub/Sub
// subscription sought, or left acknowledged by an earlier job, past
// messages still on the topic. The job service calls InputStart once,
// before the job's first execution starts, and marks every pane of a
// window that began before start as cut short (runner.Options.PartialBefore):
// its earlier input was never seen, so its totals are partial.
type InputStarter interface {
	Source
	// InputStart returns start, just after the newest event time of the
	// input the source skips, and a note saying what it found for a user
	// (the subscription, topic and sequence). ok is false when nothing is
	// skipped (a subscription reading from the topic's beginning, or whose
	// skipped messages are no longer on the topic).
	InputStart(ctx context.Context) (start mtime.Time, note string, ok bool, err error)
}
