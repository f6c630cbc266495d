package record

import (
	"time"

	"github.com/weir-dev/weir/runner/contract"
)

// RewindPoint is where the new job of a stop-and-replace re-reads its
// topics from (rewindPoint).
type RewindPoint struct {
	// Watermark is the old job's final watermark W.
	Watermark time.Time `json:"watermark"`
	// FromTime is T, the earliest event time re-read.
	FromTime time.Time `json:"from_time"`
	// SkipBefore: messages with an event time before it, up to the old
	// job's last message of their topic, are skipped.
	SkipBefore time.Time `json:"skip_before"`
	// Sources lists every Pub/Sub source of the old job.
	Sources []RewindSource `json:"sources"`
}

// RewindSource is where one topic is re-read from.
type RewindSource struct {
	// Step is the old job's source step.
	Step         string `json:"step"`
	Topic        string `json:"topic"`
	Subscription string `json:"subscription"`
	// FirstSequence is the first stream sequence the new job reads.
	FirstSequence uint64 `json:"first_sequence"`
	// LastSequence is the last message the old job read (the new job's
	// watermark is held until it has read it).
	LastSequence uint64 `json:"last_sequence"`
	// FromTime is the event time the re-read must cover (T).
	FromTime time.Time `json:"from_time"`
}

// CatchUp is the re-read a job carries on from the replacement job it
// updates in place while that job was still catching up.
type CatchUp struct {
	// FromJobID is the replacement job whose re-read this is.
	FromJobID string `json:"from_job_id"`
	// RewindPoint is that job's (its SkipBefore bounds the windows the job
	// owns, rewindOwns).
	RewindPoint *RewindPoint `json:"rewind_point"`
	// Starts are the RewindStarts of its Pub/Sub splits, by subscription.
	Starts map[string]contract.RewindStart `json:"starts"`
}

// SourceCatchUp is a re-reading source's progress (StepMetrics.CatchUp).
type SourceCatchUp struct {
	// ReadSequence is the last stream sequence the source read.
	ReadSequence uint64 `json:"read_seq"`
	// HoldUntil is the last sequence the old job read: until the source
	// has read it, its watermark is held and no pane fires.
	HoldUntil uint64 `json:"hold_until_seq"`
	// CaughtUp says the re-read is done.
	CaughtUp bool `json:"caught_up"`
	// ExpiredMessages counts the messages the re-read had to read again
	// but the topic no longer held (EventCatchUpExpired).
	ExpiredMessages uint64 `json:"expired_messages,omitempty"`
}
