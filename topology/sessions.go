package topology

import (
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Sessions returns baton's sessions application (`baton run sessions`):
// each user's sessions of activity in a stream of clicks, each written
// once, when it closes, with its bounds and its number of clicks.
//
// Each record of clicks is a click: its value is text whose first field
// (fields are separated by white space, as strings.Fields splits them) is
// the user's id; the rest of the value (a page, say) and the key are not
// used. A producer that keys clicks by user keeps each user's clicks in
// order. The click's event time is the record's timestamp. A click whose
// value holds no field has no user: it is dropped.
//
// Subtopology 0 reads clicks and writes each, keyed by its user, to
// RepartitionTopic(appID, "clicks-by-user"). Subtopology 1 counts each
// user's clicks in sessions of inactivity gap gap with grace period grace
// (SessionCount over InactivityGap(gap).Grace(grace), in session store
// "sessions"), and holds each session back until it closes
// (SuppressUntilWindowCloses, in store "closed-sessions"): a session is
// written once the stream time of its task, the latest click time it has
// seen, is past the session's last click by more than gap plus grace.
// Stream time moves only with clicks, so a session waits for a later
// click of a user of the same task; the last sessions of a quiet input
// wait for the next click.
//
// A session is written to output once, as
//
//	key:   <user>@<start>
//	value: <start> <end> <clicks>
//
// where start and end are the times of the session's first and last
// clicks in Unix milliseconds (end is included: a session of one click
// has start == end), and clicks is the number of its clicks, all decimal
// ASCII. The key is unique per session, so a compacted output keeps
// every one. The record's timestamp is the time of the click that closed
// the session.
//
// Clicks of a user at most gap apart are one session; a click that comes
// after later ones (the producers' clocks drift, a click is sent late)
// joins or merges sessions as if it had come in order, provided it is at
// most grace behind the stream time or falls within an open session or
// the gap after one. Any other click is late: dropped and counted in
// baton_late_records_total. Clicks of different input partitions reach a
// session task interleaved as they are processed, so the grace must
// cover how far the click times of different partitions drift apart.
//
// gap and grace are whole milliseconds, gap > 0 and grace >= 0.
func Sessions(appID, clicks, output string, gap, grace time.Duration) (*Topology, error) {
	b := NewBuilder(appID)
	in := FromTopic(b, clicks, Bytes, String)
	withUser := Filter(in, func(_ []byte, click string) bool { return clickUser(click) != "" })
	byUser := GroupBy(withUser, func(_ []byte, click string) string { return clickUser(click) }, String, "clicks-by-user")
	counts := SessionCount(SessionWindowedBy(byUser, InactivityGap(gap).Grace(grace)), "sessions")
	closed := SuppressUntilWindowCloses(counts, "closed-sessions").ToStream()
	Map(closed, func(w Windowed[string], n int64) (string, string) {
		start, end := w.Start.UnixMilli(), w.End.UnixMilli()
		key := w.Key + "@" + strconv.FormatInt(start, 10)
		return key, strconv.FormatInt(start, 10) + " " + strconv.FormatInt(end, 10) + " " + strconv.FormatInt(n, 10)
	}).WithCodecs(String, String).To(output)
	return b.Build()
}

// clickUser returns the first field of a click's value, or "".
func clickUser(click string) string {
	click = strings.TrimLeftFunc(click, unicode.IsSpace)
	if i := strings.IndexFunc(click, unicode.IsSpace); i >= 0 {
		return click[:i]
	}
	return click
}
