// Package member is the group-membership adapter between franz-go's
// consumer group and baton's assignor: a cooperative kgo.GroupBalancer
// (Balancer) whose join metadata carries the instance's subscription
// (package protocol) inside a standard ConsumerMemberMetadata, and whose
// leader side decodes every member's subscription, builds an assign.State,
// runs assign.Assign and encodes each member's part back into a standard
// ConsumerMemberAssignment. Because both envelopes are Kafka's own, kcat,
// kadm and DescribeGroups still read the group.
//
// A task is active on a member exactly when the member owns the task's
// source partitions: the partitions in the assignment are the truth about
// actives, and baton's user data adds standbys, learners, revocations and
// the follow-up flag.
//
// The leader never fails a round because of a member: metadata that does
// not decode makes that member a new one (logged); a member speaking a
// newer protocol is answered at this build's version with the
// version-probing code; a task claimed active by two members (a zombie)
// stays with the newest generation. Use one Balancer per client; its Self
// callbacks run on the client's group goroutine and must not block.
package member
