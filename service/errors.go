package service

import (
	"errors"
	"fmt"

	"github.com/weir-dev/weir/errcode"
)

// Code is a stable error code. Clients and tests match on codes, never on
// messages; a code, once published, keeps its meaning. The registry of
// codes, their kinds and HTTP statuses is package errcode; Code is an alias
// of errcode.Code, and the constants below re-declare the registry's codes
// of the job service under the names they have always had here.
type Code = errcode.Code

// Kind says what sort of failure a code is (an alias of errcode.Kind); the
// API maps codes to HTTP status codes through the registry.
type Kind = errcode.Kind

// Error kinds (re-declared from errcode).
const (
	// KindInvalid: the request is wrong (bad JSON, invalid name, options
	// or pipeline); fix it and retry.
	KindInvalid = errcode.KindInvalid
	// KindNotFound: the job (or route) does not exist.
	KindNotFound = errcode.KindNotFound
	// KindConflict: the request is valid but clashes with the job's
	// current state (an illegal transition, a second active job of a name).
	KindConflict = errcode.KindConflict
	// KindUnavailable: the service is shutting down; retry after restart.
	KindUnavailable = errcode.KindUnavailable
	// KindInternal: the service failed (storage error); see the server log.
	KindInternal = errcode.KindInternal
)

// The codes of the job service (errcode.AreaService). Every error the
// service and the API's job routes return carries one of these codes; see
// package errcode for what each means.
const (
	CodeInvalidRequest       = errcode.InvalidRequest
	CodeInvalidJobName       = errcode.InvalidJobName
	CodeInvalidOptions       = errcode.InvalidOptions
	CodeInvalidPipeline      = errcode.InvalidPipeline
	CodeInvalidFilter        = errcode.InvalidFilter
	CodeJobNotFound          = errcode.JobNotFound
	CodeNotFound             = errcode.NotFound
	CodeMethodNotAllowed     = errcode.MethodNotAllowed
	CodeJobNameActive        = errcode.JobNameActive
	CodeIllegalTransition    = errcode.IllegalTransition
	CodeJobTerminated        = errcode.JobTerminated
	CodeBatchJobNotDrainable = errcode.BatchJobNotDrainable
	CodeNoRunningJob         = errcode.NoRunningJob
	CodeAlreadyUpdated       = errcode.JobAlreadyUpdated
	CodeIncompatible         = errcode.IncompatibleUpdate
	CodeInvalidMapping       = errcode.InvalidMapping
	CodeUpdateInProgress     = errcode.UpdateInProgress
	CodeShuttingDown         = errcode.ShuttingDown
	CodeProgramChanged       = errcode.ProgramChanged
	CodeNotReleasable        = errcode.NotReleasable
	CodeStorageUnavailable   = errcode.StorageUnavailable
	CodeResuming             = errcode.Resuming
	CodeSnapshotNotFound     = errcode.SnapshotNotFound
	CodeNotSnapshottable     = errcode.JobNotSnapshottable
	CodeInvalidTTL           = errcode.InvalidTTL
	CodeSnapshotExists       = errcode.SnapshotExists
	CodeSnapshotCorrupt      = errcode.SnapshotCorrupt
	CodeSnapshotSDKMismatch  = errcode.SnapshotSDKMismatch
	CodeInternal             = errcode.Internal
	// Codes of service options and replacement jobs (replace.go).
	CodeUnknownServiceOption      = errcode.UnknownServiceOption
	CodeInvalidServiceOption      = errcode.InvalidServiceOption
	CodeConflictingServiceOptions = errcode.ConflictingServiceOptions
	CodeRequestIDReused           = errcode.RequestIDReused
	CodeReplaceTooSoon            = errcode.ReplaceTooSoon
	CodeRewindBeyondRetention     = errcode.RewindBeyondRetention
	CodeReplacementUnavailable    = errcode.ReplacementUnavailable
	CodeNoRollbackSnapshot        = errcode.NoRollbackSnapshot
	CodeRollbackSnapshotExpired   = errcode.RollbackSnapshotExpired
	CodeRollbackUnavailable       = errcode.RollbackUnavailable
)

// Codes returns the codes of the job service (errcode.AreaService).
func Codes() []Code { return errcode.CodesOf(errcode.AreaService) }

// Error is an error with a stable code and a message for the user.
type Error struct {
	Code    Code
	Message string
	// Err is the underlying error, if any (kept for errors.Is/As).
	Err error
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// errorf returns an *Error with code and a formatted message; a %w verb
// keeps the wrapped error.
func errorf(code Code, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Code: code, Message: err.Error(), Err: errors.Unwrap(err)}
}

// internalf wraps a storage or other unexpected failure as INTERNAL, or
// as STORAGE_UNAVAILABLE when what it wraps says the store failed.
func internalf(format string, args ...any) *Error {
	e := errorf(CodeInternal, format, args...)
	var inner *Error
	if errors.As(e.Err, &inner) && inner.Code == CodeStorageUnavailable {
		e.Code = CodeStorageUnavailable
	}
	return e
}

// ErrorCode returns the code of err: the code of the first *Error in its
// chain, CodeInternal otherwise.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// NewError returns an *Error with code and message, for layers above the
// service (the API's request decoding) that report with the same registry.
func NewError(code Code, format string, args ...any) *Error { return errorf(code, format, args...) }
