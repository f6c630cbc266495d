package service

import (
	"errors"
	"fmt"
)

// Code is a stable error code. Clients and tests match on codes, never on
// messages; a code, once published, keeps its meaning.
type Code string

// Kind says what sort of failure a code is; the API maps kinds to HTTP
// status codes.
type Kind int

// Error kinds.
const (
	// KindInvalid: the request is wrong (bad JSON, invalid name, options
	// or pipeline); fix it and retry.
	KindInvalid Kind = iota + 1
	// KindNotFound: the job (or route) does not exist.
	KindNotFound
	// KindConflict: the request is valid but clashes with the job's
	// current state (an illegal transition, a second active job of a name).
	KindConflict
	// KindUnavailable: the service is shutting down; retry after restart.
	KindUnavailable
	// KindInternal: the service failed (storage error); see the server log.
	KindInternal
)

// The registry of error codes. Every error the service and the API return
// carries one of these codes.
const (
	// CodeInvalidRequest: the request body is not valid JSON, has unknown
	// fields, or misses a required field.
	CodeInvalidRequest Code = "INVALID_REQUEST"
	// CodeInvalidJobName: a job name breaks the rule [a-z]([-a-z0-9]*[a-z0-9])?.
	CodeInvalidJobName Code = "INVALID_JOB_NAME"
	// CodeInvalidOptions: a job option is out of range.
	CodeInvalidOptions Code = "INVALID_OPTIONS"
	// CodeInvalidPipeline: the pipeline YAML could not be loaded or
	// validated; the message names file:line:column.
	CodeInvalidPipeline Code = "INVALID_PIPELINE"
	// CodeInvalidFilter: a list filter (status) is unknown.
	CodeInvalidFilter Code = "INVALID_FILTER"
	// CodeJobNotFound: no job has this ID or name.
	CodeJobNotFound Code = "JOB_NOT_FOUND"
	// CodeNotFound: no such API route.
	CodeNotFound Code = "NOT_FOUND"
	// CodeMethodNotAllowed: the route exists but not with this HTTP method.
	CodeMethodNotAllowed Code = "METHOD_NOT_ALLOWED"
	// CodeJobNameActive: the name already has an active job.
	CodeJobNameActive Code = "JOB_NAME_ACTIVE"
	// CodeIllegalTransition: the job's current state does not allow the
	// requested change.
	CodeIllegalTransition Code = "ILLEGAL_TRANSITION"
	// CodeJobTerminated: the job is in a terminal state, which never changes.
	CodeJobTerminated Code = "JOB_TERMINATED"
	// CodeBatchJobNotDrainable: drain applies to streaming jobs only; a
	// batch job finishes by itself (cancel it to stop it early).
	CodeBatchJobNotDrainable Code = "BATCH_JOB_NOT_DRAINABLE"
	// CodeNoRunningJob: an update names a job name with no running (or
	// draining) job.
	CodeNoRunningJob Code = "NO_RUNNING_JOB"
	// CodeAlreadyUpdated: an update names a job that was already replaced.
	CodeAlreadyUpdated Code = "JOB_ALREADY_UPDATED"
	// CodeIncompatible: the compatibility check refused an update; the
	// running job was left untouched. The report lists every reason.
	CodeIncompatible Code = "INCOMPATIBLE_UPDATE"
	// CodeInvalidMapping: a transform name mapping is not valid JSON of
	// step names.
	CodeInvalidMapping Code = "INVALID_MAPPING"
	// CodeShuttingDown: the service is stopping.
	CodeShuttingDown Code = "SHUTTING_DOWN"
	// CodeProgramChanged: a Go program started without --update finds its
	// job running a different pipeline graph; start it with --update.
	CodeProgramChanged Code = "PROGRAM_CHANGED"
	// CodeNotReleasable: the process asked to hand its data directory over
	// does not do that (a weir server, or a job that is not a Go program's).
	CodeNotReleasable Code = "NOT_RELEASABLE"
	// CodeInternal: the service failed; the message says what it was doing.
	CodeInternal Code = "INTERNAL"
)

// codeKinds is the kind of every registered code.
var codeKinds = map[Code]Kind{
	CodeInvalidRequest:       KindInvalid,
	CodeInvalidJobName:       KindInvalid,
	CodeInvalidOptions:       KindInvalid,
	CodeInvalidPipeline:      KindInvalid,
	CodeInvalidFilter:        KindInvalid,
	CodeJobNotFound:          KindNotFound,
	CodeNotFound:             KindNotFound,
	CodeMethodNotAllowed:     KindInvalid,
	CodeJobNameActive:        KindConflict,
	CodeIllegalTransition:    KindConflict,
	CodeJobTerminated:        KindConflict,
	CodeBatchJobNotDrainable: KindConflict,
	CodeNoRunningJob:         KindNotFound,
	CodeAlreadyUpdated:       KindConflict,
	CodeIncompatible:         KindConflict,
	CodeInvalidMapping:       KindInvalid,
	CodeShuttingDown:         KindUnavailable,
	CodeProgramChanged:       KindConflict,
	CodeNotReleasable:        KindConflict,
	CodeInternal:             KindInternal,
}

// Codes returns every registered code.
func Codes() []Code {
	out := make([]Code, 0, len(codeKinds))
	for c := range codeKinds {
		out = append(out, c)
	}
	return out
}

// Kind returns the kind of c (KindInternal for an unregistered code).
func (c Code) Kind() Kind {
	if k, ok := codeKinds[c]; ok {
		return k
	}
	return KindInternal
}

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

// internalf wraps a storage or other unexpected failure as INTERNAL.
func internalf(format string, args ...any) *Error { return errorf(CodeInternal, format, args...) }

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
