package topology

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSessionsShape(t *testing.T) {
	topo, err := Sessions("s", "clicks", "out", time.Minute, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rep := RepartitionTopic("s", "clicks-by-user")
	var got []string
	for _, s := range topo.Subtopologies() {
		got = append(got, fmt.Sprint(s.ID, s.Sources, s.Sinks, s.Stores, s.Stateful()))
	}
	want := []string{
		fmt.Sprint(0, []string{"clicks"}, []string{rep}, []StoreSpec(nil), false),
		fmt.Sprint(1, []string{rep}, []string{"out"}, []StoreSpec{
			{Name: "closed-sessions", Changelog: ChangelogTopic("s", "closed-sessions"), Kind: InternalStore},
			{Name: "sessions", Changelog: ChangelogTopic("s", "sessions"), Kind: SessionStore},
		}, true),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("subtopologies:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSessionsBadDurations(t *testing.T) {
	for _, c := range []struct {
		gap, grace time.Duration
		want       string
	}{
		{0, 0, "inactivity gap 0s must be a positive whole number of milliseconds"},
		{-time.Second, 0, "inactivity gap -1s must be"},
		{1500 * time.Microsecond, 0, "inactivity gap 1.5ms must be"},
		{time.Second, -time.Second, "grace period -1s must be"},
		{time.Second, time.Microsecond, "grace period 1µs must be"},
	} {
		_, err := Sessions("s", "clicks", "out", c.gap, c.grace)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Sessions(gap %v, grace %v): %v, want an error containing %q", c.gap, c.grace, err, c.want)
		}
	}
}

func TestClickUser(t *testing.T) {
	for click, want := range map[string]string{
		"ana /home":        "ana",
		"ana":              "ana",
		"  bo\t/cart  x":   "bo",
		"ana@example.com ": "ana@example.com",
		"":                 "",
		" \t\n":            "",
		"\u00a0cy /x":      "cy", // a no-break space is white space too
	} {
		if got := clickUser(click); got != want {
			t.Errorf("clickUser(%q) = %q, want %q", click, got, want)
		}
		if f := strings.Fields(click); (len(f) == 0 && want != "") || (len(f) > 0 && f[0] != want) {
			t.Errorf("clickUser(%q) = %q is not the first of strings.Fields' %q", click, want, f)
		}
	}
}

// sessionsOf is the model: each user's clicks, in time order, cut where
// two follow each other by more than gap, as "user@start=start end n".
func sessionsOf(times map[string][]int64, gap int64) []string {
	var out []string
	for user, ts := range times {
		ts = slices.Sorted(slices.Values(ts))
		start, n := ts[0], 0
		for i, at := range ts {
			if i > 0 && at-ts[i-1] > gap {
				out = append(out, fmt.Sprintf("%s@%d=%d %d %d", user, start, start, ts[i-1], n))
				start, n = at, 0
			}
			n++
		}
		out = append(out, fmt.Sprintf("%s@%d=%d %d %d", user, start, start, ts[len(ts)-1], n))
	}
	slices.Sort(out)
	return out
}

// TestSessionsMatchesModel runs Sessions with the driver: clicks on three
// partitions, keyed by page (so a user's clicks spread over them and meet
// again through the repartition topic), some behind the latest click by
// up to the grace, some between a user's last two sessions while they are
// open, however far behind (they bridge the two into one), some without a
// user, and clicks of users never seen before far behind their task's
// stream time (late: dropped and counted). Every task moves halfway (new
// processors over the same stores). A click per session task long after
// the others closes every session. Each session the model cuts from the
// users' click times is written once, in the documented format, once it
// has closed; nothing else is.
func TestSessionsMatchesModel(t *testing.T) {
	const users = 30
	gap, grace := 10*time.Second, 3*time.Second
	topo, err := Sessions("s", "clicks", "out", gap, grace)
	if err != nil {
		t.Fatal(err)
	}
	subs := topo.Subtopologies()
	d := newDriver(t, topo, map[string]int32{"clicks": 3, "out": 2})
	rep := RepartitionTopic("s", "clicks-by-user")
	task := func(user string) int32 { return Partition([]byte(user), d.parts[rep]) }
	rng := rand.New(rand.NewPCG(testSeed(t), 37))
	base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC).UnixMilli()
	clock := base
	times := map[string][]int64{}
	now := map[int32]int64{} // each session task's stream time, as the model sees it
	late, bridged := 0, 0
	click := func(value string, ts int64) {
		t.Helper()
		page := "/p" + strconv.Itoa(rng.IntN(12))
		d.inputAt("clicks", rng.Int32N(3), []byte(page), []byte(value), time.UnixMilli(ts))
		if err := d.run(); err != nil {
			t.Fatal(err)
		}
	}
	const n = 3000
	for i := range n {
		if i == n/2 {
			for id := range d.tasks {
				sub, p, _ := ParseTaskID(id)
				d.tasks[id] = subs[sub].NewProcessor(id, p)
			}
		}
		clock += rng.Int64N(2000)
		switch r := rng.IntN(100); {
		case r < 2:
			click([]string{"", "  ", "\t"}[rng.IntN(3)], clock)
		case r < 4:
			user := fmt.Sprintf("late%d", i)
			ts := clock - 10*(gap+grace).Milliseconds()
			if now[task(user)]-ts > grace.Milliseconds() {
				late++
			} else {
				times[user] = append(times[user], ts)
				now[task(user)] = max(now[task(user)], ts)
			}
			click(user+" /late", ts)
		default:
			// Users come and go: about 8 are active at a time.
			user := "u" + strconv.Itoa((i/120+rng.IntN(8))%users)
			ts := clock
			if rng.IntN(4) == 0 {
				ts -= rng.Int64N(grace.Milliseconds() + 1)
			}
			if rng.IntN(10) == 0 {
				// Between the user's last two sessions, if they are at
				// most two gaps apart and the first is open: the click
				// is accepted, however far behind, and bridges them.
				ts0 := slices.Sorted(slices.Values(times[user]))
				for j := len(ts0) - 1; j > 0; j-- {
					a, b := ts0[j-1], ts0[j]
					if b-a > gap.Milliseconds() {
						if b-a <= 2*gap.Milliseconds() && now[task(user)]-a <= (gap+grace).Milliseconds() {
							ts = a + (b-a)/2
						}
						break
					}
				}
			}
			if bridges(times[user], ts, gap.Milliseconds()) {
				bridged++
			}
			times[user] = append(times[user], ts)
			now[task(user)] = max(now[task(user)], ts)
			click(user+" /p"+strconv.Itoa(rng.IntN(5)), ts)
		}
	}
	want := sessionsOf(times, gap.Milliseconds())
	// One click per session task, past every session's end by more than
	// the gap plus the grace, closes them all; its own session stays open.
	closers := map[int32]string{}
	for i := 0; len(closers) < int(d.parts[rep]); i++ {
		user := "closer" + strconv.Itoa(i)
		if _, ok := closers[task(user)]; !ok {
			closers[task(user)] = user
			click(user, clock+(gap+grace).Milliseconds()+1)
		}
	}
	var got []string
	for p := range d.parts["out"] {
		for _, r := range d.records("out", p) {
			key, value := string(r.Key), string(r.Value)
			got = append(got, key+"="+value)
			var start, end, clicks int64
			if _, err := fmt.Sscanf(value, "%d %d %d", &start, &end, &clicks); err != nil || value != fmt.Sprintf("%d %d %d", start, end, clicks) {
				t.Errorf("session %s: value %q is not <start> <end> <clicks> (%v)", key, value, err)
				continue
			}
			if !strings.HasSuffix(key, "@"+strconv.FormatInt(start, 10)) {
				t.Errorf("session %s=%s: the key does not end with @ and its start", key, value)
			}
			if r.Timestamp.UnixMilli()-end <= (gap + grace).Milliseconds() {
				t.Errorf("session %s=%s written at %d, before it closed", key, value, r.Timestamp.UnixMilli())
			}
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("%d sessions written, want %d", len(got), len(want))
		for _, s := range got {
			if _, ok := slices.BinarySearch(want, s); !ok {
				t.Errorf("written, not in the model: %s", s)
			}
		}
		for _, s := range want {
			if _, ok := slices.BinarySearch(got, s); !ok {
				t.Errorf("in the model, not written: %s", s)
			}
		}
	}
	if d.late["sessions"] != late || late == 0 {
		t.Errorf("late clicks: %v, want %d in store sessions (and some)", d.late, late)
	}
	if bridged == 0 {
		t.Errorf("no click bridged two sessions")
	}
	t.Logf("%d sessions, %d clicks that bridged two, %d late clicks", len(want), bridged, late)
}

// bridges says whether a click at ts joins two sessions of clicks at
// times: the clicks before and after it are more than gap apart, and it
// is within gap of both.
func bridges(times []int64, ts, gap int64) bool {
	prev, next, before, after := int64(0), int64(0), false, false
	for _, at := range times {
		if at <= ts && (!before || at > prev) {
			prev, before = at, true
		}
		if at > ts && (!after || at < next) {
			next, after = at, true
		}
	}
	return before && after && next-prev > gap && ts-prev <= gap && next-ts <= gap
}
