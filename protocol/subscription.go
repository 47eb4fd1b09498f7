package protocol

import (
	"encoding/binary"
	"maps"
	"math"
	"slices"
)

// Subscription is what a member tells the leader at every join.
type Subscription struct {
	// Version is the version the payload is encoded at. Zero encodes at
	// CurrentVersion. After decoding it is the version on the wire, which
	// may exceed CurrentVersion (see UnsupportedVersionError).
	Version int16
	// LatestSupportedVersion is the newest version the member can read.
	// Zero encodes as max(CurrentVersion, Version).
	LatestSupportedVersion int16
	// InstanceID names the instance; it must not be empty.
	InstanceID string
	// Endpoint is host:port of the instance's HTTP server, or empty.
	Endpoint string
	// Rack is the instance's rack, or empty.
	Rack string
	// Capacity is the instance's number of workers, at least 1.
	Capacity int32
	// Leaving marks an instance that asked to go (scale-in).
	Leaving bool
	// Active, Standby and Learner are the task ids ("1_3") the member owns
	// now. Order does not matter; they are encoded sorted.
	Active, Standby, Learner []string
	// Lags maps each stateful task the member has local state for to how
	// many records that state is behind its changelog's end (>= 0).
	Lags map[string]int64
	// Loads maps active tasks the member has measured to their load: the
	// share of one worker's time their processing takes, in LoadUnits
	// (>= 1). Version 2 adds it: encoding at version 1 leaves it out, and
	// a version 1 payload decodes with none.
	Loads map[string]int32
}

// LoadUnit is the share of one worker's time that a load of 1 stands for
// on the wire: a task that keeps a worker busy all the time has a load of
// 1/LoadUnit = 10000.
const LoadUnit = 1.0 / 10000

const subLeaving int8 = 1 << 0

// MarshalBinary encodes s; it implements encoding.BinaryMarshaler.
func (s Subscription) MarshalBinary() ([]byte, error) { return s.AppendBinary(nil) }

// AppendBinary appends the encoding of s to b; it implements
// encoding.BinaryAppender. On error b is returned unchanged.
func (s Subscription) AppendBinary(b []byte) ([]byte, error) {
	const msg = "subscription"
	version, latest, err := encodeVersions(msg, s.Version, s.LatestSupportedVersion)
	if err != nil {
		return b, err
	}
	if s.InstanceID == "" {
		return b, invalid(msg, "instance id is empty")
	}
	for _, f := range [...]struct{ name, v string }{{"instance id", s.InstanceID}, {"endpoint", s.Endpoint}, {"rack", s.Rack}} {
		if err := checkString(msg, f.name, f.v); err != nil {
			return b, err
		}
	}
	if s.Capacity < 1 {
		return b, invalid(msg, "instance %q: capacity %d is below 1", s.InstanceID, s.Capacity)
	}
	active, err := sortedTasks(msg, "active", s.Active)
	if err != nil {
		return b, err
	}
	standby, err := sortedTasks(msg, "standby", s.Standby)
	if err != nil {
		return b, err
	}
	learner, err := sortedTasks(msg, "learner", s.Learner)
	if err != nil {
		return b, err
	}
	lagTasks := make([]string, 0, len(s.Lags))
	for t, lag := range s.Lags {
		if lag < 0 {
			return b, invalid(msg, "instance %q: negative lag %d for task %q", s.InstanceID, lag, t)
		}
		lagTasks = append(lagTasks, t)
	}
	if lagTasks, err = sortedTasks(msg, "lags", lagTasks); err != nil {
		return b, err
	}
	if len(lagTasks) > math.MaxInt32 {
		return b, invalid(msg, "%d lags", len(lagTasks))
	}
	loadTasks := make([]string, 0, len(s.Loads))
	for t, load := range s.Loads {
		if load < 1 {
			return b, invalid(msg, "instance %q: load %d for task %q is below 1", s.InstanceID, load, t)
		}
		loadTasks = append(loadTasks, t)
	}
	if loadTasks, err = sortedTasks(msg, "loads", loadTasks); err != nil {
		return b, err
	}

	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint16(b, uint16(latest))
	b = appendString(b, s.InstanceID)
	b = appendString(b, s.Endpoint)
	b = appendString(b, s.Rack)
	b = binary.BigEndian.AppendUint32(b, uint32(s.Capacity))
	var flags int8
	if s.Leaving {
		flags |= subLeaving
	}
	b = append(b, byte(flags))
	b = appendTasks(b, active)
	b = appendTasks(b, standby)
	b = appendTasks(b, learner)
	b = binary.BigEndian.AppendUint32(b, uint32(len(lagTasks)))
	for _, t := range lagTasks {
		b = appendString(b, t)
		b = binary.BigEndian.AppendUint64(b, uint64(s.Lags[t]))
	}
	if version >= 2 {
		b = binary.BigEndian.AppendUint32(b, uint32(len(loadTasks)))
		for _, t := range loadTasks {
			b = appendString(b, t)
			b = binary.BigEndian.AppendUint32(b, uint32(s.Loads[t]))
		}
	}
	return b, nil
}

// DecodeSubscription decodes a member's user data. Malformed data returns
// an error wrapping ErrMalformed. Data newer than CurrentVersion returns the
// fields this build knows together with an *UnsupportedVersionError; any
// other error returns a zero Subscription.
func DecodeSubscription(data []byte) (Subscription, error) {
	r := reader{msg: "subscription", b: data}
	var s Subscription
	s.Version, s.LatestSupportedVersion = r.header()
	at := r.off
	s.InstanceID = r.string("instance id", -1)
	if r.err == nil && s.InstanceID == "" {
		r.fail(at, "instance id", -1, "empty")
	}
	s.Endpoint = r.string("endpoint", -1)
	s.Rack = r.string("rack", -1)
	at = r.off
	s.Capacity = r.int32("capacity")
	if r.err == nil && s.Capacity < 1 {
		r.fail(at, "capacity", -1, "capacity %d is below 1", s.Capacity)
	}
	s.Leaving = r.flags(s.Version, subLeaving)&subLeaving != 0
	s.Active = r.taskList("active")
	s.Standby = r.taskList("standby")
	s.Learner = r.taskList("learner")
	s.Lags = r.lags("lags")
	if s.Version >= 2 {
		s.Loads = r.loads("loads")
	}
	if err := r.finish(s.Version, s.LatestSupportedVersion); err != nil {
		if r.err != nil {
			return Subscription{}, err
		}
		return s, err
	}
	return s, nil
}

// Clone returns a deep copy of s.
func (s Subscription) Clone() Subscription {
	s.Active = slices.Clone(s.Active)
	s.Standby = slices.Clone(s.Standby)
	s.Learner = slices.Clone(s.Learner)
	if s.Lags != nil {
		lags := make(map[string]int64, len(s.Lags))
		for t, l := range s.Lags {
			lags[t] = l
		}
		s.Lags = lags
	}
	s.Loads = maps.Clone(s.Loads)
	return s
}
