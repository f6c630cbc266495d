package service

import (
	"github.com/weir-dev/weir/errcode"
)

// Codes returns the codes of the job service (errcode.AreaService).
func Codes() []errcode.Code { return errcode.CodesOf(errcode.AreaService) }

// Error is the error of the job service: errcode.Error, a stable code and a
// message for the user. Clients of the service (the API, Go programs)
// match on its Code.
type Error = errcode.Error

// ErrorCode returns the code of err (errcode.Of).
func ErrorCode(err error) errcode.Code { return errcode.Of(err) }

// NewError returns an *Error with code and message, for layers above the
// service (the API's request decoding) that report with the same registry.
func NewError(code errcode.Code, format string, args ...any) *Error {
	return errcode.Errorf(code, format, args...)
}
