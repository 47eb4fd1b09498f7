// Package member is the group-membership adapter between franz-go's
// consumer group and baton's assignor: a cooperative kgo.GroupBalancer
// (Balancer) whose join metadata carries the instance's subscription
// (package protocol) inside a standard ConsumerMemberMetadata, and whose
// leader side decodes every member's subscription, builds an assign.State,
// runs assign.Assign and encodes each member's part back into a standard
// ConsumerMemberAssignment. Because both envelopes are Kafka's own, kcat,
// kadm and DescribeGroups still read the group.
//
// # Protocol names
//
// A member joins with one group protocol (protocol type "consumer") named
// after its policy by ProtocolName: "baton-smooth", "baton-cooperative"
// or "baton-eager"; PolicyOf reads the policy back from the name
// DescribeGroups reports. The policies differ in more than the plans: the
// eager policy speaks the eager rebalance protocol (a member gives up
// everything before it rejoins) and the others the cooperative one (a
// member keeps what it is not told to give up). Under one shared name an
// eager leader could move a task in one round while its cooperative owner
// still runs it: two owners. With a name per policy the brokers do it for
// us: they form a group only from members that share a protocol, and
// answer the JoinGroup of a member running another policy with
// INCONSISTENT_GROUP_PROTOCOL (the App stops with a configuration error
// saying so). Changing a group's policy therefore means stopping all its
// instances first, and so does upgrading from a build that joined with the
// single name "baton".
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
