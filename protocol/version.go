package protocol

import (
	"errors"
	"fmt"
)

// CurrentVersion is the newest user-data version this build reads and
// writes. Every version from 1 to CurrentVersion is decoded in full.
const CurrentVersion int16 = 2

var (
	// ErrMalformed is wrapped by decode errors for bytes that are not a
	// valid baton payload of the version they claim.
	ErrMalformed = errors.New("protocol: malformed user data")
	// ErrUnsupportedVersion is wrapped (through *UnsupportedVersionError)
	// when a payload's version is newer than CurrentVersion.
	ErrUnsupportedVersion = errors.New("protocol: unsupported version")
	// ErrInvalid is wrapped by encode errors for values that cannot be
	// put on the wire.
	ErrInvalid = errors.New("protocol: invalid value")
)

// UnsupportedVersionError reports a payload newer than this build. The
// decoder that returns it also returns every field it knows (see the
// package's compatibility rule).
type UnsupportedVersionError struct {
	// Message is "subscription" or "assignment".
	Message string
	// Version is the version on the wire; LatestSupported is the sender's
	// latest supported version.
	Version, LatestSupported int16
}

func (e *UnsupportedVersionError) Error() string {
	return fmt.Sprintf("protocol: %s version %d is newer than this build's %d (sender supports up to %d); fields added after version %d were ignored",
		e.Message, e.Version, CurrentVersion, e.LatestSupported, CurrentVersion)
}

// Is makes errors.Is(err, ErrUnsupportedVersion) true.
func (e *UnsupportedVersionError) Is(target error) bool { return target == ErrUnsupportedVersion }

// ErrorCode is the leader's verdict carried in an Assignment.
type ErrorCode int8

const (
	// ErrorNone: the assignment is complete.
	ErrorNone ErrorCode = 0
	// ErrorVersionProbing: the leader could not read the whole subscription
	// because the member speaks a newer version; it planned with the fields
	// it knows and answered at Assignment.Version. The member keeps
	// running the assignment; it need not rejoin.
	ErrorVersionProbing ErrorCode = 1
)

func (c ErrorCode) String() string {
	switch c {
	case ErrorNone:
		return "none"
	case ErrorVersionProbing:
		return "version-probing"
	}
	return fmt.Sprintf("ErrorCode(%d)", int8(c))
}

func (c ErrorCode) valid() bool { return c == ErrorNone || c == ErrorVersionProbing }

// Negotiate returns the version the leader must encode a member's
// assignment at, given the Version of the member's decoded subscription,
// and the error code to send: ErrorVersionProbing when the member is newer
// than this build.
func Negotiate(memberVersion int16) (version int16, code ErrorCode) {
	if memberVersion > CurrentVersion {
		return CurrentVersion, ErrorVersionProbing
	}
	return memberVersion, ErrorNone
}
