package topology

import "time"

// UnknownRegion is the region PageViews counts a view under when its user
// is not in the users table.
const UnknownRegion = "unknown"

// PageViews returns baton's page-views application (`baton run
// pageviews`): views per region per window. views holds page views, key =
// user id, value = the page (not used); users is a compacted topic of the
// users' regions, key = user id, value = region, read as a table in store
// "users" (TableFromTopic: the topic is the store's changelog). The two
// must have the same number of partitions.
//
// Subtopology 0 reads both: it joins each view with its user's region
// (LeftJoinTable) and writes the view, keyed by region, to
// RepartitionTopic(appID, "views-by-region"). A view whose user is not
// in the table (never written, or deleted by a tombstone; a view without
// a key too) is counted under UnknownRegion, so every view is counted
// once. Subtopology 1 counts each region's views in tumbling windows of
// size window by event time, the view record's timestamp, with grace
// period grace, in store "views-per-region"; for every view it sends the
// region's new count in the view's window to output, keyed by
// WindowedCodec(String, window) (the region's bytes, then the window's
// start in milliseconds, 8 bytes big-endian), value = the count as
// decimal ASCII. A view that arrives when its window has closed (the
// store's stream time at or past the window's end plus grace) is late:
// it is dropped and counted in baton_late_records_total.
//
// A view is joined with the table as the task has it when the view is
// processed: a task processes the users topic up to its end before its
// first view, then both topics in the order their records are fetched,
// so a view written right after its user's region changed may still be
// counted under the old region.
//
// window and grace are whole milliseconds, window > 0 and grace >= 0;
// windows are aligned to the Unix epoch and kept in the store for window
// plus grace of stream time.
func PageViews(appID, views, users, output string, window, grace time.Duration) (*Topology, error) {
	b := NewBuilder(appID)
	regions := TableFromTopic(b, users, "users", String, String)
	stream := FromTopic(b, views, String, String)
	located := LeftJoinTable(stream, regions, func(_, _ string, region string, found bool) string {
		if !found {
			return UnknownRegion
		}
		return region
	})
	byRegion := GroupBy(located, func(_, region string) string { return region }, String, "views-by-region")
	w := TumblingWindows(window).Grace(grace)
	WindowCount(WindowedBy(byRegion, w), "views-per-region").ToStream().To(output)
	return b.Build()
}
