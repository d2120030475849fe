package rpc

import (
	"context"
	"errors"
	"fmt"
)

// Class is what an error means to the one who called, and so how every
// door answers it (after maddy's exterrors): the caller's fault, an outage
// of what the answer needed, or a bug. Refusals are never answered as
// outages, outages never as refusals, and a bug is a 500 everywhere.
type Class string

const (
	// Refused is the caller's fault; its Code says which. Asking again
	// the same way gets the same answer.
	Refused Class = "refused"
	// Outage is the store or the plane that cannot answer now: it cannot
	// be reached, was closed, or ran out of time. Only connectivity and
	// timeouts are outages; asking again later may work.
	Outage Class = "outage"
	// Bug is anything else: a handler's error or panic, corrupt stored
	// data, an answer its reader cannot decode. It is answered 500
	// internal_error, logged where it happened, and never shown.
	Bug Class = "bug"
)

// classOfCode is the class a code has: the codes of outages and of bugs
// are few and fixed, every other code is a refusal.
func classOfCode(code string) Class {
	switch code {
	case CodeStoreUnavailable, CodePlaneUnavailable, CodeDeadlineExceeded:
		return Outage
	case CodeInternal, "":
		return Bug
	}
	return Refused
}

// Errorf builds an *Error of the class its code has.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Class: classOfCode(code), Message: fmt.Sprintf(format, args...)}
}

// ClassOf is err's class: an *Error's own (or its code's, when it came
// without one), Outage for a context's end, Bug for any other error, and
// "" for nil.
func ClassOf(err error) Class {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		switch e.Class {
		case Refused, Outage, Bug:
			return e.Class
		case "":
			return classOfCode(e.Code)
		}
		return Bug // a class this side does not know: wire drift
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return Outage
	}
	return Bug
}

// CodeOf is err's code: an *Error's, CodeDeadlineExceeded for a context's
// end, CodeInternal for any other error (a bug), and "" for nil.
func CodeOf(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) && ClassOf(err) != Bug {
		return e.Code
	}
	if ClassOf(err) == Outage {
		return CodeDeadlineExceeded
	}
	return CodeInternal
}

// IsOutage reports whether err means "try again later" rather than "no".
func IsOutage(err error) bool { return ClassOf(err) == Outage }

// Answers is one door's table from a plane error to the door's own answer
// (an HTTP error body, an SMTP reply, a page, an MCP error): one answer
// per refusal code the door names, one for every outage and one for
// every bug. A refusal the door does not name is a bug of the door's
// (the plane refused the door itself, or a code this door does not know):
// it is answered as one.
type Answers[T any] struct {
	Refused map[string]T
	Outage  T
	Bug     T
}

// For is the answer to err, a non-nil error, and its class as the door
// answers it (Bug for a refusal not in the table).
func (a *Answers[T]) For(err error) (T, Class) {
	switch c := ClassOf(err); c {
	case Refused:
		if v, ok := a.Refused[CodeOf(err)]; ok {
			return v, c
		}
	case Outage:
		return a.Outage, c
	}
	return a.Bug, Bug
}
