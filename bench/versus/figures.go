package versus

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Arrival is one output record as the reader saw it: its partition, when
// it arrived and how long after its input record was sent (arrival minus
// the record's timestamp, which is the send time of the input line it
// came from). Times are since the Recording's start.
type Arrival struct {
	Partition int32         `json:"p"`
	At        time.Duration `json:"at_ns"`
	Latency   time.Duration `json:"latency_ns"`
}

// Status is one status line of an instance with its arrival time.
type Status struct {
	At   time.Duration `json:"at_ns"`
	Line StatusLine    `json:"line"`
}

// Recording is what the harness saw during one run: every output arrival
// and every status line, both in arrival order.
type Recording struct {
	Start      time.Time `json:"start"`
	Partitions int32     `json:"partitions"`
	Arrivals   []Arrival `json:"arrivals"`
	Status     []Status  `json:"status"`
	// Reads are the query load's reads (Config.Queries), in the order
	// asked.
	Reads []Read `json:"reads,omitempty"`
}

// Event is one scale event in a recording: the action at At, compared
// over After with the Steady window before it. Live are the instances that
// should share the tasks once the event is over; the event is balanced
// when each of them runs its share of the active stateful tasks.
type Event struct {
	Name   string        `json:"name"`
	At     time.Duration `json:"at_ns"`
	Steady time.Duration `json:"steady_ns"`
	After  time.Duration `json:"after_ns"`
	Live   []string      `json:"live"`
}

// StaleStatus is how old an instance's last status line may be and still
// tell what it runs: three missed lines of a once-a-second printer mean
// the process is gone (killed) or stuck.
const StaleStatus = 3 * time.Second

// StallGap is the gap between arrivals on an output partition above which
// the partition counts as stalled.
const StallGap = time.Second

// Latency summarizes end-to-end latencies.
type Latency struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// PartitionFigures is what one output partition went through: partition p
// is written only by count task 1_p, so its gaps are that task's.
type PartitionFigures struct {
	Partition int32  `json:"partition"`
	From      string `json:"from"` // active owner of 1_p at the event ("" if unknown)
	To        string `json:"to"`   // active owner at the end of the window, or when balanced if later
	Moved     bool   `json:"moved"`
	// SteadyMedian and SteadyLongest are the median and longest gap
	// between arrivals in the steady window (the partition's normal
	// rhythm); Longest the longest gap overlapping the window after the
	// event (a partition silent since its last arrival counts as stalled
	// up to the window's end).
	SteadyMedian  time.Duration `json:"steady_median_gap_ns"`
	SteadyLongest time.Duration `json:"steady_longest_gap_ns"`
	Longest       time.Duration `json:"longest_gap_ns"`
}

// EventFigures are the figures of one event on one engine configuration.
type EventFigures struct {
	Event  string  `json:"event"`
	Steady Latency `json:"steady"`
	After  Latency `json:"after"`
	// Moved and Unmoved count output partitions whose count task changed
	// active owner during the window, and the others; the longest gaps
	// are the largest over each group, with the steady longest gap of the
	// same partitions for comparison.
	Moved               int           `json:"moved"`
	Unmoved             int           `json:"unmoved"`
	MovedLongestGap     time.Duration `json:"moved_longest_gap_ns"`
	UnmovedLongestGap   time.Duration `json:"unmoved_longest_gap_ns"`
	UnmovedSteadyGap    time.Duration `json:"unmoved_steady_gap_ns"`
	UnmovedSteadyMedian time.Duration `json:"unmoved_steady_median_gap_ns"`
	// Stalled counts partitions with a gap over StallGap after the event.
	Stalled int `json:"stalled"`
	// Balanced says whether the live instances ran their shares of the
	// active stateful tasks by the end of the recording, TimeToBalance
	// how long after the event that first held.
	Balanced      bool          `json:"balanced"`
	TimeToBalance time.Duration `json:"time_to_balance_ns"`
	// Restored is the changelog records restored on the critical path:
	// into the stores of active tasks, over the window after the event
	// (RestoredIn). nil (null) when not observed: some status line did
	// not report it.
	Restored   *int64             `json:"restored"`
	Partitions []PartitionFigures `json:"partitions"`
}

// Analyze computes the figures of ev from rec. It is pure; rec's slices
// must be in time order (as recorded).
func Analyze(rec Recording, ev Event) EventFigures {
	end := ev.At + ev.After
	ef := EventFigures{Event: ev.Name}
	var steady, after []time.Duration
	byPart := make([][]time.Duration, rec.Partitions)
	for _, a := range rec.Arrivals {
		switch {
		case a.At >= ev.At-ev.Steady && a.At < ev.At:
			steady = append(steady, a.Latency)
		case a.At >= ev.At && a.At <= end:
			after = append(after, a.Latency)
		}
		if a.Partition >= 0 && a.Partition < rec.Partitions && a.At <= end {
			byPart[a.Partition] = append(byPart[a.Partition], a.At)
		}
	}
	ef.Steady, ef.After = Summarize(steady), Summarize(after)
	if n, ok := RestoredIn(rec.Status, ev.At, end); ok {
		ef.Restored = &n
	}
	// Who runs what is read until the group balanced, when that was
	// after the window: a move late in the window shows only then.
	settled := end
	balancedAt, balanced := BalancedAt(rec.Status, rec.Partitions, ev.Live, ev.At)
	if balanced {
		ef.Balanced, ef.TimeToBalance = true, balancedAt-ev.At
		settled = max(settled, balancedAt)
	}
	before := ActiveOwners(rec.Status, ev.At)
	atEnd := ActiveOwners(rec.Status, settled)
	for p := range rec.Partitions {
		task := "1_" + strconv.Itoa(int(p))
		pf := PartitionFigures{Partition: p, From: before[task], To: atEnd[task]}
		pf.Moved = pf.From != "" && movedAway(rec.Status, task, pf.From, ev.At, settled)
		pf.SteadyMedian, pf.SteadyLongest = steadyGaps(byPart[p], ev.At-ev.Steady, ev.At)
		pf.Longest = LongestGap(byPart[p], ev.At, end)
		if pf.Longest > StallGap {
			ef.Stalled++
		}
		if pf.Moved {
			ef.Moved++
			ef.MovedLongestGap = max(ef.MovedLongestGap, pf.Longest)
		} else {
			ef.Unmoved++
			ef.UnmovedLongestGap = max(ef.UnmovedLongestGap, pf.Longest)
			ef.UnmovedSteadyGap = max(ef.UnmovedSteadyGap, pf.SteadyLongest)
			ef.UnmovedSteadyMedian = max(ef.UnmovedSteadyMedian, pf.SteadyMedian)
		}
		ef.Partitions = append(ef.Partitions, pf)
	}
	return ef
}

// Summarize returns the count, median, 99th percentile (nearest rank) and
// maximum of ds.
func Summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p int) time.Duration { return s[max(0, (p*len(s)+99)/100-1)] }
	return Latency{N: len(s), P50: rank(50), P99: rank(99), Max: s[len(s)-1]}
}

// steadyGaps returns the median and longest time between consecutive
// arrivals both within [from, to).
func steadyGaps(ats []time.Duration, from, to time.Duration) (median, longest time.Duration) {
	var gaps []time.Duration
	prev := time.Duration(-1)
	for _, at := range ats {
		if at < from || at >= to {
			continue
		}
		if prev >= 0 {
			gaps = append(gaps, at-prev)
		}
		prev = at
	}
	if len(gaps) == 0 {
		return 0, 0
	}
	slices.Sort(gaps)
	return gaps[(len(gaps)-1)/2], gaps[len(gaps)-1]
}

// LongestGap is the longest time between consecutive arrivals that
// overlaps [from, to]: the gap running into from counts from the last
// arrival before it (or from itself when there was none), and a partition
// silent since its last arrival counts as stalled up to to.
func LongestGap(ats []time.Duration, from, to time.Duration) time.Duration {
	var longest time.Duration
	prev := from
	for _, at := range ats {
		if at > to {
			break
		}
		if at > from {
			longest = max(longest, at-prev)
		}
		prev = at
	}
	return max(longest, to-prev)
}

// latest returns, per instance, its last status line at or before t that
// is at most StaleStatus old.
func latest(status []Status, t time.Duration) map[string]StatusLine {
	m := map[string]StatusLine{}
	for _, s := range status {
		if s.At > t {
			break
		}
		if s.At >= t-StaleStatus {
			m[s.Line.Instance] = s.Line
		} else {
			delete(m, s.Line.Instance)
		}
	}
	return m
}

// ActiveOwners returns, per task, the instance whose current status line
// at t lists it active. Two claims at once (a handover caught between two
// lines) go to the instance whose name sorts first.
func ActiveOwners(status []Status, t time.Duration) map[string]string {
	m := latest(status, t)
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	owners := map[string]string{}
	for _, n := range names {
		for _, task := range m[n].Active {
			if _, ok := owners[task]; !ok {
				owners[task] = n
			}
		}
	}
	return owners
}

// movedAway reports whether a status line in (from, to] lists task active
// on an instance other than owner.
func movedAway(status []Status, task, owner string, from, to time.Duration) bool {
	for _, s := range status {
		if s.At <= from || s.At > to || s.Line.Instance == owner {
			continue
		}
		if slices.Contains(s.Line.Active, task) {
			return true
		}
	}
	return false
}

// BalancedAt returns the time of the first status line after from at which
// every live instance has a current line (printed after from) listing at
// least its share, partitions/len(live) rounded down, of active count
// tasks (1_*), and the live instances together run all of them.
func BalancedAt(status []Status, partitions int32, live []string, from time.Duration) (time.Duration, bool) {
	if len(live) == 0 || partitions <= 0 {
		return 0, false
	}
	share := int(partitions) / len(live)
	cur := map[string]StatusLine{}
	for _, s := range status {
		if s.At <= from {
			continue
		}
		cur[s.Line.Instance] = s.Line
		covered := map[string]bool{}
		ok := true
		for _, n := range live {
			l, seen := cur[n]
			if !seen {
				ok = false
				break
			}
			mine := 0
			for _, t := range l.Active {
				if strings.HasPrefix(t, "1_") {
					mine++
					covered[t] = true
				}
			}
			if mine < share {
				ok = false
				break
			}
		}
		if ok && len(covered) == int(partitions) {
			return s.At, true
		}
	}
	return 0, false
}

// ProcessedAt returns the sum over instances of their last processed
// count at or before t (a killed instance keeps what it reported).
func ProcessedAt(status []Status, t time.Duration) int64 {
	last := map[string]int64{}
	for _, s := range status {
		if s.At > t {
			break
		}
		last[s.Line.Instance] = s.Line.Processed
	}
	var sum int64
	for _, n := range last {
		sum += n
	}
	return sum
}

// RestoredIn returns the sum over instances of how much their restored
// counts grew from from to to: from each instance's last line at or
// before from (0 for an instance with none, one that starts during the
// window) to its last line at or before to. A count that goes down is an
// instance that started again: all of its new count is new. ok is false
// when a line up to to does not report restored, or no line falls in
// (from, to].
func RestoredIn(status []Status, from, to time.Duration) (n int64, ok bool) {
	last := map[string]int64{}
	seen := false
	for _, s := range status {
		if s.At > to {
			break
		}
		r := s.Line.Restored
		if r == nil {
			return 0, false
		}
		name := s.Line.Instance
		if s.At <= from {
			last[name] = *r
			continue
		}
		seen = true
		prev := last[name]
		if *r < prev {
			prev = 0
		}
		n += *r - prev
		last[name] = *r
	}
	if !seen {
		return 0, false
	}
	return n, true
}

// FirstProcessed returns the first time the instances' processed counts
// summed to at least n.
func FirstProcessed(status []Status, n int64) (time.Duration, bool) {
	last := map[string]int64{}
	var sum int64
	for _, s := range status {
		sum += s.Line.Processed - last[s.Line.Instance]
		last[s.Line.Instance] = s.Line.Processed
		if sum >= n {
			return s.At, true
		}
	}
	return 0, false
}

// Counts is the final check of a run's output against its input.
type Counts struct {
	Words int `json:"words"`
	// Lost counts words whose last output count is below their
	// occurrences in the input; Over words above it (allowed under
	// at-least-once after a crash, never under exactly-once).
	Lost    int      `json:"lost"`
	Over    int      `json:"over"`
	Example []string `json:"examples,omitempty"`
}

// CheckCounts compares the last count per word on the output with the
// true occurrences. Examples name up to three wrong words, sorted, lost
// ones first.
func CheckCounts(truth, got map[string]int64) Counts {
	c := Counts{Words: len(truth)}
	words := make([]string, 0, len(truth))
	for w := range truth {
		words = append(words, w)
	}
	slices.Sort(words)
	var over []string
	for _, w := range words {
		n, g := truth[w], got[w]
		if g == n {
			continue
		}
		ex := fmt.Sprintf("%s: %d counted, %d in the input", w, g, n)
		if g < n {
			c.Lost++
			if len(c.Example) < 3 {
				c.Example = append(c.Example, ex)
			}
		} else {
			c.Over++
			if len(over) < 3 {
				over = append(over, ex)
			}
		}
	}
	c.Example = append(c.Example, over[:min(len(over), 3-len(c.Example))]...)
	for w := range got {
		if _, ok := truth[w]; !ok {
			c.Over++
		}
	}
	return c
}

// Exact reports whether every word's count equals its occurrences.
func (c Counts) Exact() bool { return c.Lost == 0 && c.Over == 0 }
