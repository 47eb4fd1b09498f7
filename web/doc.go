// Package web serves an instance's operator endpoints: GET / (a live page
// of the whole group as this instance sees it), GET /status (the instance's
// baton.Status as JSON, whose fields the README describes where it
// introduces /status, under "Two terminals: a cluster and instances"),
// GET /metrics (Prometheus text format, when given a registry),
// GET /group (the JSON the page polls) and GET /query/STORE/KEY (a read of
// one key wherever its task runs: baton.App.QueryHandler, whose contract
// is docs/queries.md; the page has a box per store for it).
//
// # What /group shows and where it comes from
//
// The group's members are read from the cluster without joining it: a
// DescribeGroups on the app id, whose members' ConsumerMemberMetadata carry
// baton's subscription (package protocol): instance id, HTTP endpoint,
// roles and lags as of the member's last join. Each other member's live
// tasks come from its own /status at that endpoint; a member that does not
// answer in time is shown from its subscription and marked so. The leader
// is the instance whose /status says leader=true, and its last plan (with
// the assignor's reasons) is Status.Plan. The Handler keeps a bounded
// timeline of the plans it has seen, one per generation; ReadGroup is also
// what `baton inspect` uses.
//
// Learner progress is the share of the task's changelog restored: one minus
// its lag over the changelog's end offset (the largest of the app's
// changelogs, <app-id>-<store>-changelog, at that partition), or over the
// largest lag seen for it when the changelogs cannot be read. The Handler
// remembers those peaks only for the tasks it currently shows.
//
// The group's input lag (View.Input) sums the input lag in records and
// the input rate of the active tasks of the instances read from their
// live /status, with the largest seconds behind; it is partial when some
// instance was shown from its subscription. The recommended number of
// instances (View.Autoscale) is the leader's Status.Autoscale.
//
// # Lifecycle and threading
//
// New builds the Handler; it starts nothing. Every GET /group reads the
// group at once. Run, optional, reads it periodically so the timeline
// also fills while nobody watches; it returns when its context ends.
// The Handler is safe for concurrent use; its lock covers only the merge
// of what was read, never network I/O. The page's assets are embedded
// (plain HTML, CSS and JavaScript, no build step).
package web
