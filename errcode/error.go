package errcode

import (
	"errors"
	"fmt"
)

// Error is an error with a stable code from the registry and a message for
// the user. Every layer that answers a client (the job service, the API,
// the CLI) reports with it, so a client matches on Code, never on Message.
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

// Errorf returns an *Error with code and a formatted message; a %w verb
// keeps the wrapped error (for errors.Is/As).
func Errorf(code Code, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Code: code, Message: err.Error(), Err: errors.Unwrap(err)}
}

// Internalf wraps a storage or other unexpected failure as INTERNAL, or as
// STORAGE_UNAVAILABLE when what it wraps says the state store failed.
func Internalf(format string, args ...any) *Error {
	e := Errorf(Internal, format, args...)
	var inner *Error
	if errors.As(e.Err, &inner) && inner.Code == StorageUnavailable {
		e.Code = StorageUnavailable
	}
	return e
}

// Of returns the code of err: the code of the first *Error in its chain,
// Internal otherwise (an error without a code is a failure of weir's, not
// of the request).
func Of(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}
