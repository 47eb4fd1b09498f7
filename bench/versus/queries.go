package versus

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/baton-streams/baton/internal/query"
)

// queryEngines are the engines whose instances, started with --http
// HOST:PORT, serve GET /query/counts/KEY as docs/queries.md says: baton
// (`run wordcount --http`) and the Kafka Streams peer (its interactive
// queries). Others run without a query load.
var queryEngines = map[string]bool{"baton": true, "kstreams": true}

// Read is one query of the load, as its client saw it.
type Read struct {
	// At is when it was asked, since the session's start; Took how long
	// the answer took.
	At   time.Duration `json:"at_ns"`
	Took time.Duration `json:"took_ns"`
	Word string        `json:"word"`
	// Client is which client of the load asked.
	Client int `json:"client"`
	// Outcome is one of the Read* outcomes.
	Outcome string `json:"outcome"`
	// Value is the count answered (-1: not found or not answered);
	// Instance and Role the copy that answered.
	Value    int64  `json:"value"`
	Instance string `json:"instance,omitempty"`
	Role     string `json:"role,omitempty"`
	// Why is a refusal's or an error's message.
	Why string `json:"why,omitempty"`
}

// Outcomes of a read.
const (
	// ReadAnswered: a count.
	ReadAnswered = "answered"
	// ReadRefused: the instance said no copy met the bounds in time (503).
	ReadRefused = "refused"
	// ReadError: any other failure (a refused connection, a 500, a
	// timeout of the client itself).
	ReadError = "error"
)

// queryLoad is clients reading the counts of prefilled words through the
// live instances' endpoints, each passing back, per task, the changelog
// offset it last saw.
type queryLoad struct {
	s       *session
	maxLag  int64
	every   time.Duration // between one client's reads
	words   []string
	cancel  context.CancelFunc
	done    sync.WaitGroup
	client  *http.Client
	mu      sync.Mutex
	live    []string // endpoints the clients ask
	reads   []Read
	stopped bool
	// tasks maps a word to its task, learned from answers (the same for
	// every engine: murmur2 of the word over the partitions).
	tasks sync.Map
}

// freeEndpoint returns 127.0.0.1:PORT with a port free now.
func freeEndpoint() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startQueries starts n clients on s; the words read are the first
// (up to 1000) of the prefill, which every instance has counted before
// the load starts.
func (s *session) startQueries(ctx context.Context, n, rate int, maxLag int64) *queryLoad {
	ctx, cancel := context.WithCancel(ctx)
	q := &queryLoad{s: s, maxLag: maxLag, cancel: cancel, every: time.Second / time.Duration(rate),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	for i := range min(s.cfg.Keys, 1000) {
		q.words = append(q.words, "w"+strconv.Itoa(i))
	}
	for c := range n {
		q.done.Add(1)
		go func() {
			defer q.done.Done()
			q.client1(ctx, c)
		}()
	}
	return q
}

// setLive replaces the endpoints the clients ask.
func (q *queryLoad) setLive(endpoints []string) {
	q.mu.Lock()
	q.live = slices.Clone(endpoints)
	q.mu.Unlock()
}

func (q *queryLoad) client1(ctx context.Context, client int) {
	rng := rand.New(rand.NewPCG(uint64(client), 11))
	offsets := map[string]int64{} // task -> highest offset seen
	next := time.Now()
	for ctx.Err() == nil {
		// Paced: a read every q.every, none made up after a slow one, so
		// that every engine serves the same load.
		if wait := time.Until(next); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		next = next.Add(q.every)
		if now := time.Now(); next.Before(now) {
			next = now
		}
		q.mu.Lock()
		live := q.live
		q.mu.Unlock()
		if len(live) == 0 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		ep := live[rng.IntN(len(live))]
		word := q.words[rng.IntN(len(q.words))]
		b := query.Bounds{MaxLag: q.maxLag, Timeout: 5 * time.Second}
		// The task is known only from an answer: the offset passed back
		// is the one seen of the word's task (by the word's last answer).
		task := ""
		if t, ok := q.tasks.Load(word); ok {
			task = t.(string)
			b.MinOffset = offsets[task]
		}
		at := q.s.now()
		a, err := query.Ask(ctx, q.client, ep, "counts", []byte(word), b, false)
		took := q.s.now() - at
		if ctx.Err() != nil {
			return // the load stopped with this read under way
		}
		r := Read{At: at, Took: took, Word: word, Client: client, Value: -1}
		switch {
		case err == nil:
			r.Outcome, r.Instance, r.Role = ReadAnswered, a.Instance, a.Role
			if a.Found {
				v, perr := strconv.ParseInt(string(a.Value), 10, 64)
				if perr != nil {
					v = 0 // not a count: Check finds it wrong
				}
				r.Value = v
			}
			q.tasks.Store(word, a.Task)
			offsets[a.Task] = max(offsets[a.Task], a.Offset)
		case errors.Is(err, query.ErrUnavailable):
			r.Outcome, r.Why = ReadRefused, err.Error()
		default:
			r.Outcome, r.Why = ReadError, err.Error()
		}
		q.mu.Lock()
		if !q.stopped {
			q.reads = append(q.reads, r)
		}
		q.mu.Unlock()
	}
}

// stop ends the load and returns its reads in the order they were asked.
func (q *queryLoad) stop() []Read {
	q.cancel()
	q.done.Wait()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopped = true
	reads := slices.Clone(q.reads)
	slices.SortFunc(reads, func(a, b Read) int { return int(a.At - b.At) })
	return reads
}

// QueryFigures are a query load's figures in one window.
type QueryFigures struct {
	Reads    int `json:"reads"`
	Answered int `json:"answered"`
	Refused  int `json:"refused"`
	Errors   int `json:"errors"`
	// Wrong counts answers that cannot be the word's count at any
	// moment: not a count, or more than the word's occurrences written by
	// the end of the run.
	Wrong int `json:"wrong"`
	// Missing counts answers that the word has no count: the state of a
	// copy that had not applied the word's first records yet (every word
	// read was counted before the load began). Within a lag bound that is
	// an old state, not a wrong one; after a count, the same client's
	// "not found" is a read back in time (Back).
	Missing int `json:"missing"`
	// Back counts answers below one the same client had for the word
	// earlier in the run.
	Back int           `json:"back"`
	P50  time.Duration `json:"p50_ns,omitempty"`
	P99  time.Duration `json:"p99_ns,omitempty"`
	Max  time.Duration `json:"max_ns,omitempty"`
	// Example is a refusal, an error or a wrong answer, for the report.
	Example string `json:"example,omitempty"`
}

// Share is the answered share of the reads (1 with no read).
func (f QueryFigures) Share() float64 {
	if f.Reads == 0 {
		return 1
	}
	return float64(f.Answered) / float64(f.Reads)
}

// QueryWindows are a run's query figures before and during its event.
type QueryWindows struct {
	Clients int   `json:"clients"`
	Rate    int   `json:"rate"` // reads per second per client, at most
	MaxLag  int64 `json:"max_lag"`
	// Steady is the steady window before the event; During from the
	// event until the group ran balanced, at least 5 s (or the end of
	// the recording).
	Steady QueryFigures `json:"steady"`
	During QueryFigures `json:"during"`
	// DuringEnd is the end of During, since the session's start.
	DuringEnd time.Duration `json:"during_end_ns"`
}

// AnalyzeQueries computes the figures of reads around ev; truth is every
// word's occurrences written by the end of the run. It is pure.
func AnalyzeQueries(reads []Read, truth map[string]int64, ev Event, balancedAt time.Duration, balanced bool) QueryWindows {
	end := ev.At + ev.After
	if balanced {
		end = min(end, max(balancedAt, ev.At+5*time.Second))
	}
	w := QueryWindows{DuringEnd: end}
	// Going back in time is judged per client over the whole load, the
	// reads before the windows included.
	type key struct {
		client int
		word   string
	}
	high := map[key]int64{}
	back := make([]bool, len(reads))
	for i, r := range reads {
		if r.Outcome != ReadAnswered {
			continue
		}
		k := key{r.Client, r.Word}
		prev, seen := high[k]
		back[i] = seen && r.Value < prev
		high[k] = max(prev, r.Value)
	}
	var steady, during []int
	for i, r := range reads {
		switch {
		case r.At >= ev.At-ev.Steady && r.At < ev.At:
			steady = append(steady, i)
		case r.At >= ev.At && r.At < end:
			during = append(during, i)
		}
	}
	w.Steady = queryFigures(reads, steady, back, truth)
	w.During = queryFigures(reads, during, back, truth)
	return w
}

func queryFigures(reads []Read, in []int, back []bool, truth map[string]int64) QueryFigures {
	var f QueryFigures
	var lat []time.Duration
	for _, i := range in {
		r := reads[i]
		f.Reads++
		switch r.Outcome {
		case ReadAnswered:
			f.Answered++
			lat = append(lat, r.Took)
			switch {
			case r.Value == 0 || r.Value > truth[r.Word]:
				f.Wrong++
				if f.Example == "" {
					f.Example = "wrong: " + r.Word + "=" + strconv.FormatInt(r.Value, 10) + " from " + r.Role + " on " + r.Instance + " (written " + strconv.FormatInt(truth[r.Word], 10) + ")"
				}
			case back[i]:
				f.Back++
			case r.Value < 0:
				f.Missing++
				if f.Example == "" {
					f.Example = "not found: " + r.Word + " from " + r.Role + " on " + r.Instance + " (written " + strconv.FormatInt(truth[r.Word], 10) + ")"
				}
			}
		case ReadRefused:
			f.Refused++
			if f.Example == "" {
				f.Example = r.Why
			}
		default:
			f.Errors++
			if f.Example == "" {
				f.Example = r.Why
			}
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		f.P50, f.P99, f.Max = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	}
	return f
}
