package web

import (
	"context"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/baton-streams/baton/member"
)

// Group is a baton consumer group as DescribeGroups shows it to a reader
// that is not a member (member.Group).
type Group = member.Group

// Member is one group member with its decoded baton subscription
// (member.Member).
type Member = member.Member

// ReadGroup describes the consumer group id through adm without joining
// it (member.ReadGroup).
func ReadGroup(ctx context.Context, adm *kadm.Client, id string) (Group, error) {
	return member.ReadGroup(ctx, adm, id)
}
