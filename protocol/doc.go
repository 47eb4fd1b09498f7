// Package protocol encodes and decodes baton's user data: the versioned
// bytes a member puts in the UserData of its Kafka ConsumerMemberMetadata
// (a [Subscription]: what it owns, what state it has and how far behind
// that state is) and the bytes the group leader puts in each member's
// ConsumerMemberAssignment (an [Assignment]: what it must run, warm up or
// give up). It does not build the consumer-protocol envelope around them;
// that is the member's job.
//
// # Lifecycle
//
// There is none: the package is pure. A member builds a Subscription and
// calls [Subscription.MarshalBinary] at every join; the leader calls
// [DecodeSubscription] on every member's user data, runs the assignor, and
// sends each member an [Assignment] encoded at the version [Negotiate]
// picks; the member calls [DecodeAssignment].
//
// # Wire format
//
// Big-endian, no padding. Every payload starts with an int16 version and an
// int16 latest supported version. Strings are an int16 byte length followed
// by the bytes; lists are an int32 count followed by the elements. Task
// lists are written in ascending byte order without duplicates, and lags in
// ascending task order, so equal values encode to equal bytes (the leader's
// output is deterministic and the golden files in testdata pin the layout).
//
// Subscription, version 1:
//
//	int16  version
//	int16  latest supported version
//	string instance id (not empty)
//	string endpoint (host:port of the instance's HTTP server; may be empty)
//	string rack (may be empty)
//	int32  capacity (workers, >= 1)
//	int8   flags (bit 0: leaving; other bits zero)
//	list   active task ids
//	list   standby task ids
//	list   learner task ids
//	list   lags: (string task id, int64 records behind the changelog end >= 0)
//
// Subscription, version 2: version 1 followed by
//
//	list   loads: (string task id, int32 load >= 1), in ascending task order
//
// A load is the share of one worker's time the task's processing took
// recently, in units of [LoadUnit] (1/10000 of a worker: 10000 is a worker
// busy all the time). A member lists the active tasks it has measured, with
// loads already quantised (see docs/assign.md); a task it has not measured
// yet is not listed, and the leader estimates it.
//
// Assignment, version 1:
//
//	int16  version
//	int16  latest supported version (the leader's)
//	int8   error code (see [ErrorCode])
//	int8   flags (bit 0: follow-up rebalance wanted; other bits zero)
//	list   active, standby, learner, revoked task ids
//
// Assignment, version 2: the version 1 layout with version 2 in its
// version field; it adds no field. A leader answers each member at the
// version [Negotiate] picks, so a version 1 member of a mixed group gets
// version 1 assignments and a version 2 member of a version 1 leader gets
// a version 1 assignment with [ErrorVersionProbing].
//
// # Compatibility rule
//
// The encoding of version N+1 is the encoding of version N, with its
// version field set to N+1, followed by the fields version N+1 adds.
// Fields are never removed, reordered or given a new meaning; a later
// version that needs more per-task data appends a new list. Hence a decoder
// that meets a version newer than [CurrentVersion] still reads every field
// it knows: it returns that value together with an error wrapping
// [ErrUnsupportedVersion] (an [*UnsupportedVersionError] carrying the
// version it saw). This is Kafka Streams' version probing made cheap: an
// old leader plans with what it can read of a new member's subscription
// and answers at the highest version both understand, with
// [ErrorVersionProbing]; a member never has to rejoin to downgrade. Older
// versions are always decoded in full.
//
// # Guarantees
//
// Decoders never panic, whatever the input, and never allocate more than a
// small multiple of the input's length: a count or length that cannot fit
// in the bytes that remain is an error. Malformed input returns an error
// wrapping [ErrMalformed] that names the message, the field and the byte
// offset. A value that cannot be encoded (duplicate task, negative lag,
// string too long) returns an error wrapping [ErrInvalid]. Decoded values
// own their memory; empty lists and maps decode as nil.
//
// # Thread safety
//
// All functions are safe for concurrent use; values are plain data.
package protocol
