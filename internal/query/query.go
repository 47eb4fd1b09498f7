// Package query answers reads of a task's store from outside the task:
// which copy of a task may answer a read (Serves, pure), the Router that
// finds such a copy on this instance or on another one, and the HTTP
// contract every instance serves for it (Handler, and Ask, its client).
//
// What it owns, and who runs it: a Router is called from any goroutine
// (an HTTP handler's, App.Get's caller's); it reads this instance's
// copies through its Source, which reads stores safely from outside
// their owner (state.Store.Read), and asks other instances over HTTP. Its
// lock covers its caches only, never I/O. It starts no goroutine that
// outlives a call.
//
// The contract, in the project's words, is docs/queries.md.
package query

import (
	"errors"
	"fmt"
	"time"
)

// DefaultTimeout is how long a read waits for a copy that meets its
// bounds when the caller names no timeout.
const DefaultTimeout = 5 * time.Second

// MaxTimeout bounds the timeout a caller may ask for.
const MaxTimeout = 5 * time.Minute

// Roles a copy of a task has on an instance.
const (
	RoleActive  = "active"
	RoleLearner = "learner"
	RoleStandby = "standby"
)

// Bounds are what a read accepts.
type Bounds struct {
	// MaxLag: any copy at most MaxLag records behind its changelog's end
	// may answer. Negative: only the active, once it has restored.
	MaxLag int64
	// MinOffset: the answer must reflect the task's changelog at least up
	// to this offset (the Offset of an earlier answer).
	MinOffset int64
	// Timeout is how long to wait for a copy that meets the bounds; zero
	// is DefaultTimeout.
	Timeout time.Duration
	// MinOffsets are, for a range read, each task's MinOffset.
	MinOffsets map[string]int64
	// Limit bounds a range read's entries; zero is DefaultLimit.
	Limit int
}

// ActiveOnly are the default bounds: the active, any offset.
var ActiveOnly = Bounds{MaxLag: -1}

// Answer is one read's result.
type Answer struct {
	Store string
	Key   []byte
	// Found is false when the key has no value; Value is then nil.
	Found bool
	Value []byte
	// Task, Instance and Role say which copy answered, Lag how far
	// behind its changelog's end that copy was (0 for an active that has
	// restored), and Offset the changelog position the answer reflects:
	// the next changelog offset the copy would apply.
	Task     string
	Instance string
	Role     string
	Lag      int64
	Offset   int64
	// Entries and Truncated are one task's part of a range read.
	Entries   []Entry
	Truncated bool
}

// Copy is this instance's copy of a task, as a read found it.
type Copy struct {
	Answer
	// Restoring: an active copy still catching up with its changelog.
	Restoring bool
}

// Serves reports whether copy c may answer a read with bounds b.
func Serves(c Copy, b Bounds) bool {
	if c.Offset < b.MinOffset {
		return false
	}
	if b.MaxLag < 0 {
		return c.Role == RoleActive && !c.Restoring
	}
	return c.Lag <= b.MaxLag
}

// better reports whether answer x should be preferred to y when both
// serve: the active, then the copy that reflects more of the changelog.
func better(x, y Answer) bool {
	if (x.Role == RoleActive) != (y.Role == RoleActive) {
		return x.Role == RoleActive
	}
	return x.Offset > y.Offset
}

// Errors a read returns, tested with errors.Is.
var (
	// ErrNoStore: the application has no store of that name that
	// queries can read.
	ErrNoStore = errors.New("no such store")
	// ErrUnavailable: no copy met the bounds before the timeout
	// (*UnavailableError says which task and the lowest lag seen).
	ErrUnavailable = errors.New("no copy met the bounds")
	// ErrBadRequest: a parameter of the read is not valid.
	ErrBadRequest = errors.New("bad query")
)

// UnavailableError is the ErrUnavailable of one read.
type UnavailableError struct {
	Store, Task string
	Bounds      Bounds
	Waited      time.Duration
	// Lowest is the lowest lag of a copy seen while waiting; -1 if no
	// copy of the task was seen.
	Lowest int64
	// Offset is the highest changelog position a copy was seen at, for
	// a read held back by its MinOffset; -1 if none was seen.
	Offset int64
}

func (e *UnavailableError) Error() string {
	want := "the active, restored"
	if e.Bounds.MaxLag >= 0 {
		want = fmt.Sprintf("a copy at most %d records behind", e.Bounds.MaxLag)
	}
	if e.Bounds.MinOffset > 0 {
		want += fmt.Sprintf(" at changelog offset %d or later", e.Bounds.MinOffset)
	}
	seen := "no copy of it answered"
	if e.Lowest >= 0 {
		seen = fmt.Sprintf("the lowest lag seen was %d", e.Lowest)
		if e.Bounds.MinOffset > 0 {
			seen += fmt.Sprintf(", the highest offset %d", e.Offset)
		}
	}
	return fmt.Sprintf("store %s task %s: no copy met the bounds (%s) within %v; %s", e.Store, e.Task, want, e.Waited.Round(time.Millisecond), seen)
}

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }
