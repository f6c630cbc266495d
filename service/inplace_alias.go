package service

import "github.com/weir-dev/weir/service/internal/inplace"

// Temporary aliases while the in-place update moves to package inplace.
type (
	ProgramRequest = inplace.ProgramRequest
	ProgramStart   = inplace.ProgramStart
	ReleaseRequest = inplace.ReleaseRequest
)

const (
	ActionResumed   = inplace.ActionResumed
	ActionSubmitted = inplace.ActionSubmitted
	ActionUpdated   = inplace.ActionUpdated
	ActionValidated = inplace.ActionValidated
)
