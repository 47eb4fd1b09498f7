package versus

import (
	"testing"
	"time"
)

func TestAnalyzeQueries(t *testing.T) {
	ms := time.Millisecond
	ev := Event{Name: "scale-out", At: 10 * time.Second, Steady: 5 * time.Second, After: 30 * time.Second}
	truth := map[string]int64{"w1": 5, "w2": 3}
	reads := []Read{
		{At: 4 * time.Second, Client: 0, Word: "w1", Outcome: ReadAnswered, Value: 4, Took: 9 * ms}, // before the steady window
		{At: 6 * time.Second, Client: 0, Word: "w1", Outcome: ReadAnswered, Value: 5, Took: 2 * ms},
		{At: 7 * time.Second, Client: 1, Word: "w2", Outcome: ReadAnswered, Value: 3, Took: 4 * ms},
		{At: 11 * time.Second, Client: 1, Word: "w1", Outcome: ReadAnswered, Value: 4, Took: 30 * ms}, // client 1 never saw 5: not back
		{At: 12 * time.Second, Client: 0, Word: "w1", Outcome: ReadAnswered, Value: 4, Took: 40 * ms}, // client 0 saw 5: back
		{At: 13 * time.Second, Client: 0, Word: "w2", Outcome: ReadAnswered, Value: 7, Took: 1 * ms},  // more than written: wrong
		{At: 14 * time.Second, Client: 2, Word: "w2", Outcome: ReadAnswered, Value: -1, Took: 1 * ms}, // not found: missing
		{At: 14 * time.Second, Client: 1, Word: "w2", Outcome: ReadAnswered, Value: -1, Took: 1 * ms}, // not found after 3: back
		{At: 14 * time.Second, Client: 0, Word: "w1", Outcome: ReadAnswered, Value: 0, Took: 1 * ms},  // not a count: wrong
		{At: 14 * time.Second, Client: 2, Word: "w1", Outcome: ReadRefused, Why: "no copy", Took: 5000 * ms},
		{At: 14500 * ms, Client: 1, Word: "w2", Outcome: ReadError, Why: "connection refused"},
		{At: 16 * time.Second, Client: 1, Word: "w2", Outcome: ReadAnswered, Value: 3, Took: 1 * ms}, // after the window (balanced at 12 s, at least 5 s)
	}
	w := AnalyzeQueries(reads, truth, ev, 12*time.Second, true)
	if w.DuringEnd != 15*time.Second {
		t.Errorf("during ends at %v, want 15s (the event plus at least 5 s)", w.DuringEnd)
	}
	st := w.Steady
	if st.Reads != 2 || st.Answered != 2 || st.Wrong != 0 || st.Back != 0 || st.P99 != 4*ms {
		t.Errorf("steady: %+v", st)
	}
	du := w.During
	if du.Reads != 8 || du.Answered != 6 || du.Refused != 1 || du.Errors != 1 || du.Wrong != 2 || du.Back != 2 || du.Missing != 1 {
		t.Errorf("during: %+v; want 8 reads, 6 answered, 1 refused, 1 error, 2 wrong, 2 back, 1 missing", du)
	}
	if du.Max != 40*ms {
		t.Errorf("during max %v, want 40ms (answered reads only)", du.Max)
	}
	if got := du.Share(); got != 6.0/8 {
		t.Errorf("share %v", got)
	}
	// Not balanced: the window runs to the end of After.
	if w := AnalyzeQueries(reads, truth, ev, 0, false); w.DuringEnd != 40*time.Second || w.During.Reads != 9 {
		t.Errorf("unbalanced: ends %v with %d reads, want 40s and 9", w.DuringEnd, w.During.Reads)
	}
}
