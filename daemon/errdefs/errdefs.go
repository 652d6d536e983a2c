// Package errdefs holds the daemon's error classes. Domain packages return
// them; the gRPC layer maps each class to its status code.
package errdefs

import (
	"errors"
	"fmt"
)

// Kind is an error class.
type Kind int

// Error classes, each mapped to one gRPC code.
const (
	KindInternal Kind = iota
	KindInvalid
	KindNotFound
	KindPrecondition
	KindPermission
	KindExhausted
	KindUnavailable
	KindExists
)

// Error is a classified error whose message says what happened and what to do.
type Error struct {
	Kind Kind
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	if e.Err != nil && e.Msg == "" {
		return e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

func mk(k Kind, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &Error{Kind: k, Msg: err.Error(), Err: errors.Unwrap(err)}
}

// Invalid reports bad input.
func Invalid(format string, args ...any) error { return mk(KindInvalid, format, args...) }

// NotFound reports something missing or invisible to the caller.
func NotFound(format string, args ...any) error { return mk(KindNotFound, format, args...) }

// Precondition reports an action not allowed in the current state.
func Precondition(format string, args ...any) error { return mk(KindPrecondition, format, args...) }

// Permission reports an action the caller's role may not take.
func Permission(format string, args ...any) error { return mk(KindPermission, format, args...) }

// Exhausted reports a cap reached.
func Exhausted(format string, args ...any) error { return mk(KindExhausted, format, args...) }

// Unavailable reports a dependency that is not there (e.g. the adviser without a key).
func Unavailable(format string, args ...any) error { return mk(KindUnavailable, format, args...) }

// Internal reports a fault of the daemon.
func Internal(format string, args ...any) error { return mk(KindInternal, format, args...) }

// KindOf returns the class of err (KindInternal when unclassified).
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}
