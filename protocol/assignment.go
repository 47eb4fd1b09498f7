package protocol

import "encoding/binary"

// Assignment is what the leader tells one member.
type Assignment struct {
	// Version is the version the payload is encoded at; zero encodes at
	// CurrentVersion. The leader uses the version Negotiate returns. After
	// decoding it is the version on the wire.
	Version int16
	// LatestSupportedVersion is the newest version the leader can read.
	// Zero encodes as max(CurrentVersion, Version).
	LatestSupportedVersion int16
	// Error is the leader's verdict; see ErrorCode.
	Error ErrorCode
	// Followup asks the member to rejoin at once: some task was revoked
	// and will be assigned in the next round.
	Followup bool
	// Active, Standby and Learner are what the member must run now;
	// Revoked lists actives it must give up (commit, flush the changelog)
	// before rejoining. Order does not matter; they are encoded sorted.
	Active, Standby, Learner, Revoked []string
}

const asgFollowup int8 = 1 << 0

// MarshalBinary encodes a; it implements encoding.BinaryMarshaler.
func (a Assignment) MarshalBinary() ([]byte, error) { return a.AppendBinary(nil) }

// AppendBinary appends the encoding of a to b; it implements
// encoding.BinaryAppender. On error b is returned unchanged.
func (a Assignment) AppendBinary(b []byte) ([]byte, error) {
	const msg = "assignment"
	version, latest, err := encodeVersions(msg, a.Version, a.LatestSupportedVersion)
	if err != nil {
		return b, err
	}
	if !a.Error.valid() {
		return b, invalid(msg, "unknown error code %d", int8(a.Error))
	}
	var lists [4][]string
	for i, l := range [...]struct {
		name  string
		tasks []string
	}{{"active", a.Active}, {"standby", a.Standby}, {"learner", a.Learner}, {"revoked", a.Revoked}} {
		if lists[i], err = sortedTasks(msg, l.name, l.tasks); err != nil {
			return b, err
		}
	}
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint16(b, uint16(latest))
	b = append(b, byte(a.Error))
	var flags int8
	if a.Followup {
		flags |= asgFollowup
	}
	b = append(b, byte(flags))
	for _, l := range lists {
		b = appendTasks(b, l)
	}
	return b, nil
}

// DecodeAssignment decodes the leader's user data for this member, with
// the same error rules as DecodeSubscription.
func DecodeAssignment(data []byte) (Assignment, error) {
	r := reader{msg: "assignment", b: data}
	var a Assignment
	a.Version, a.LatestSupportedVersion = r.header()
	at := r.off
	a.Error = ErrorCode(r.int8("error code"))
	if r.err == nil && a.Version <= CurrentVersion && !a.Error.valid() {
		r.fail(at, "error code", -1, "unknown error code %d", int8(a.Error))
	}
	a.Followup = r.flags(a.Version, asgFollowup)&asgFollowup != 0
	a.Active = r.taskList("active")
	a.Standby = r.taskList("standby")
	a.Learner = r.taskList("learner")
	a.Revoked = r.taskList("revoked")
	if err := r.finish(a.Version, a.LatestSupportedVersion); err != nil {
		if r.err != nil {
			return Assignment{}, err
		}
		return a, err
	}
	return a, nil
}
