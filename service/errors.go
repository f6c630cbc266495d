package service

import (
	"errors"
	"fmt"

	"github.com/weir-dev/weir/errcode"
)

// Codes returns the codes of the job service (errcode.AreaService).
func Codes() []errcode.Code { return errcode.CodesOf(errcode.AreaService) }

// Error is an error with a stable code and a message for the user.
type Error struct {
	Code    errcode.Code
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
func errorf(code errcode.Code, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Code: code, Message: err.Error(), Err: errors.Unwrap(err)}
}

// internalf wraps a storage or other unexpected failure as INTERNAL, or
// as STORAGE_UNAVAILABLE when what it wraps says the store failed.
func internalf(format string, args ...any) *Error {
	e := errorf(errcode.Internal, format, args...)
	var inner *Error
	if errors.As(e.Err, &inner) && inner.Code == errcode.StorageUnavailable {
		e.Code = errcode.StorageUnavailable
	}
	return e
}

// ErrorCode returns the code of err: the code of the first *Error in its
// chain, errcode.Internal otherwise.
func ErrorCode(err error) errcode.Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return errcode.Internal
}

// NewError returns an *Error with code and message, for layers above the
// service (the API's request decoding) that report with the same registry.
func NewError(code errcode.Code, format string, args ...any) *Error {
	return errorf(code, format, args...)
}
