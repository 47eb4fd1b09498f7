package query

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// wire is an Answer as JSON: the value in its text form, or in base64
// when its bytes are not UTF-8.
type wire struct {
	Store       string  `json:"store"`
	Key         string  `json:"key"`
	Found       bool    `json:"found"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 *string `json:"value_base64,omitempty"`
	Task        string  `json:"task"`
	Instance    string  `json:"instance"`
	Role        string  `json:"role"`
	Lag         int64   `json:"lag"`
	Offset      int64   `json:"offset"`
}

// MarshalJSON writes ra as the instances serve a range read.
func (ra RangeAnswer) MarshalJSON() ([]byte, error) { return json.Marshal(rangeWire(ra)) }

// MarshalJSON writes a as the instances serve it (docs/queries.md).
func (a Answer) MarshalJSON() ([]byte, error) { return json.Marshal(toWire(a)) }

func toWire(a Answer) wire {
	w := wire{Store: a.Store, Key: string(a.Key), Found: a.Found, Task: a.Task, Instance: a.Instance, Role: a.Role, Lag: a.Lag, Offset: a.Offset}
	if a.Found {
		text(a.Value, &w.Value, &w.ValueBase64)
	}
	return w
}

func (w wire) answer() (Answer, error) {
	a := Answer{Store: w.Store, Key: []byte(w.Key), Found: w.Found, Task: w.Task, Instance: w.Instance, Role: w.Role, Lag: w.Lag, Offset: w.Offset}
	v, err := untext(w.Value, w.ValueBase64)
	if err != nil {
		return Answer{}, fmt.Errorf("value_base64: %w", err)
	}
	a.Value = v
	return a, nil
}

// Handler serves GET /query/STORE/KEY through r, as docs/queries.md
// says: parameters max-lag, min-offset and timeout, and local (answer
// from this instance's copy only, at once: what instances ask each
// other). Mount it at /query/ (or with the pattern "GET /query/").
func Handler(r *Router) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			fail(w, http.StatusMethodNotAllowed, fmt.Errorf("%w: method %s; use GET", ErrBadRequest, req.Method))
			return
		}
		start := time.Now()
		store, key, hasKey, err := splitPath(req.URL)
		if err != nil {
			r.asked("key", false, start, err)
			fail(w, http.StatusBadRequest, err)
			return
		}
		q := req.URL.Query()
		kind, read, err := readOf(r, req, q, store, key, hasKey)
		var local bool
		var b Bounds
		if err == nil {
			b, local, err = ParseBounds(q)
		}
		if err != nil {
			r.asked(kind, local, start, err)
			fail(w, http.StatusBadRequest, err)
			return
		}
		body, err := read(b, local)
		switch {
		case errors.Is(err, ErrNoStore):
			fail(w, http.StatusNotFound, err)
		case errors.Is(err, ErrBadRequest):
			fail(w, http.StatusBadRequest, err)
		case errors.Is(err, ErrUnavailable):
			fail(w, http.StatusServiceUnavailable, err)
		case err != nil:
			fail(w, http.StatusInternalServerError, err)
		default:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(body)
		}
	})
}

// readOf decides, from the path and the parameters, which read a request
// asks for: one key, a key range (no key in the path), or a key's windows
// (window-from or window-to), and returns its kind and the read itself.
func readOf(r *Router, req *http.Request, q url.Values, store, key string, hasKey bool) (string, func(Bounds, bool) (any, error), error) {
	ctx := req.Context()
	switch {
	case !hasKey:
		var from, to []byte
		if q.Has("from") {
			from = []byte(q.Get("from"))
		}
		if q.Has("to") {
			to = []byte(q.Get("to"))
		}
		return "range", func(b Bounds, local bool) (any, error) {
			return r.Range(ctx, store, from, to, b, local, q.Get("task"))
		}, nil
	case q.Has("window-from") || q.Has("window-to"):
		from, to, err := windowBounds(q)
		return "window", func(b Bounds, local bool) (any, error) {
			return r.Windows(ctx, store, []byte(key), from, to, b, local)
		}, err
	}
	return "key", func(b Bounds, local bool) (any, error) {
		return r.Get(ctx, store, []byte(key), b, local)
	}, nil
}

// windowBounds reads window-from and window-to (ParseWindow).
func windowBounds(q url.Values) (from, to time.Time, err error) {
	return ParseWindow(q.Get("window-from"), q.Get("window-to"))
}

// ParseWindow reads the bounds of a window read: milliseconds since the
// epoch or RFC 3339 times; empty, the earliest and the latest window.
func ParseWindow(fromText, toText string) (from, to time.Time, err error) {
	at := func(name, s string, def time.Time) (time.Time, error) {
		if s == "" {
			return def, nil
		}
		if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
			return time.UnixMilli(ms), nil
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || t.UnixMilli() < 0 {
			return time.Time{}, fmt.Errorf("%w: %s=%q: want milliseconds since the epoch or an RFC 3339 time, not before 1970", ErrBadRequest, name, s)
		}
		return t, nil
	}
	if from, err = at("window-from", fromText, time.UnixMilli(0)); err != nil {
		return
	}
	to, err = at("window-to", toText, time.UnixMilli(math.MaxInt64))
	return
}

// splitPath reads STORE and KEY from /query/STORE/KEY, each
// path-escaped (the key may hold slashes once escaped, %2F), or STORE
// alone from /query/STORE, a range read.
func splitPath(u *url.URL) (store, key string, hasKey bool, err error) {
	p := u.EscapedPath()
	const prefix = "/query/"
	if !strings.HasPrefix(p, prefix) || len(p) == len(prefix) {
		return "", "", false, fmt.Errorf("%w: path %q: want /query/STORE/KEY, or /query/STORE for a range", ErrBadRequest, u.Path)
	}
	rest := p[len(prefix):]
	escStore, escKey, hasKey := strings.Cut(rest, "/")
	if escStore == "" {
		return "", "", false, fmt.Errorf("%w: path %q: want /query/STORE/KEY, or /query/STORE for a range", ErrBadRequest, u.Path)
	}
	if store, err = url.PathUnescape(escStore); err == nil && hasKey {
		key, err = url.PathUnescape(escKey)
	}
	if err != nil {
		return "", "", false, fmt.Errorf("%w: path %q: %v", ErrBadRequest, u.Path, err)
	}
	return store, key, hasKey, nil
}

// ParseBounds reads max-lag, min-offset, timeout and local from q. An
// absent parameter takes its default (ActiveOnly, DefaultTimeout).
func ParseBounds(q url.Values) (b Bounds, local bool, err error) {
	b = ActiveOnly
	b.Timeout = DefaultTimeout
	num := func(name string) (int64, bool, error) {
		s := q.Get(name)
		if s == "" {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return 0, false, fmt.Errorf("%w: %s=%q: want a whole number of records, 0 or more", ErrBadRequest, name, s)
		}
		return n, true, nil
	}
	var set bool
	if b.MaxLag, set, err = num("max-lag"); err != nil {
		return b, false, err
	} else if !set {
		b.MaxLag = -1
	}
	if b.MinOffset, _, err = num("min-offset"); err != nil {
		return b, false, err
	}
	if s := q.Get("timeout"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || d > MaxTimeout {
			return b, false, fmt.Errorf("%w: timeout=%q: want a Go duration above 0 and at most %v, such as 500ms or 5s", ErrBadRequest, s, MaxTimeout)
		}
		b.Timeout = d
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			return b, false, fmt.Errorf("%w: limit=%q: want a number of entries from 1 to %d", ErrBadRequest, s, MaxLimit)
		}
		b.Limit = n
	}
	if s := q.Get("min-offsets"); s != "" {
		b.MinOffsets = map[string]int64{}
		for part := range strings.SplitSeq(s, ",") {
			task, off, ok := strings.Cut(part, ":")
			n, err := strconv.ParseInt(off, 10, 64)
			if !ok || task == "" || err != nil || n < 0 {
				return b, false, fmt.Errorf("%w: min-offsets=%q: want TASK:OFFSET[,TASK:OFFSET], such as 1_0:120,1_3:88", ErrBadRequest, s)
			}
			b.MinOffsets[task] = n
		}
	}
	if s := q.Get("local"); s != "" {
		if local, err = strconv.ParseBool(s); err != nil {
			return b, false, fmt.Errorf("%w: local=%q: want true or false", ErrBadRequest, s)
		}
	}
	return b, local, nil
}

func fail(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

// entryWire is an Entry as JSON: key and value as text, or in base64
// when their bytes are not UTF-8; a window read's entries have the
// record key and the window's start instead of the store's key.
type entryWire struct {
	Key         *string `json:"key,omitempty"`
	KeyBase64   *string `json:"key_base64,omitempty"`
	WindowStart *int64  `json:"window_start,omitempty"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 *string `json:"value_base64,omitempty"`
	Task        string  `json:"task"`
}

// copyWire is the copy of one task that answered a range read.
type copyWire struct {
	Task     string `json:"task"`
	Instance string `json:"instance"`
	Role     string `json:"role"`
	Lag      int64  `json:"lag"`
	Offset   int64  `json:"offset"`
}

type rangeWireT struct {
	Store     string      `json:"store"`
	Key       *string     `json:"key,omitempty"`
	Entries   []entryWire `json:"entries"`
	Tasks     []copyWire  `json:"tasks"`
	Truncated bool        `json:"truncated"`
}

// text sets one of t and b64 to v: its text when UTF-8, else base64.
func text(v []byte, t, b64 **string) {
	s := string(v)
	if !utf8.Valid(v) {
		s = base64.StdEncoding.EncodeToString(v)
		*b64 = &s
		return
	}
	*t = &s
}

func untext(t, b64 *string) ([]byte, error) {
	switch {
	case t != nil:
		return []byte(*t), nil
	case b64 != nil:
		return base64.StdEncoding.DecodeString(*b64)
	}
	return nil, nil
}

// rangeWire is ra as JSON; a window read's entries show their window's
// start.
func rangeWire(ra RangeAnswer) rangeWireT {
	w := rangeWireT{Store: ra.Store, Entries: []entryWire{}, Tasks: []copyWire{}, Truncated: ra.Truncated}
	if ra.Window != nil {
		k := string(ra.Window)
		w.Key = &k
	}
	for _, e := range ra.Entries {
		ew := entryWire{Task: e.Task}
		if ra.Window != nil {
			ms := e.WindowStart.UnixMilli()
			ew.WindowStart = &ms
		}
		text(e.Key, &ew.Key, &ew.KeyBase64)
		text(e.Value, &ew.Value, &ew.ValueBase64)
		w.Entries = append(w.Entries, ew)
	}
	for _, a := range ra.Tasks {
		w.Tasks = append(w.Tasks, copyWire{Task: a.Task, Instance: a.Instance, Role: a.Role, Lag: a.Lag, Offset: a.Offset})
	}
	return w
}

func (w rangeWireT) answer() (RangeAnswer, error) {
	ra := RangeAnswer{Store: w.Store, Truncated: w.Truncated}
	if w.Key != nil {
		ra.Window = []byte(*w.Key)
	}
	for _, ew := range w.Entries {
		k, err := untext(ew.Key, ew.KeyBase64)
		if err != nil {
			return RangeAnswer{}, fmt.Errorf("key_base64: %w", err)
		}
		v, err := untext(ew.Value, ew.ValueBase64)
		if err != nil {
			return RangeAnswer{}, fmt.Errorf("value_base64: %w", err)
		}
		e := Entry{Key: k, Value: v, Task: ew.Task}
		if ew.WindowStart != nil {
			e.WindowStart = time.UnixMilli(*ew.WindowStart)
		}
		ra.Entries = append(ra.Entries, e)
	}
	for _, c := range w.Tasks {
		ra.Tasks = append(ra.Tasks, Answer{Store: w.Store, Task: c.Task, Instance: c.Instance, Role: c.Role, Lag: c.Lag, Offset: c.Offset})
	}
	return ra, nil
}

// AskRange reads the keys in [from, to) of store (nil: unbounded)
// through the instance serving HTTP at endpoint; task, when set, reads
// that task only, and local makes the instance read its own copy only.
// A refusal is a *StatusError.
func AskRange(ctx context.Context, cl *http.Client, endpoint, store string, from, to []byte, task string, b Bounds, local bool) (RangeAnswer, error) {
	q := boundsQuery(b, local)
	if from != nil {
		q.Set("from", string(from))
	}
	if to != nil {
		q.Set("to", string(to))
	}
	if task != "" {
		q.Set("task", task)
	}
	var w rangeWireT
	if err := get(ctx, cl, endpoint, "/query/"+url.PathEscape(store)+"?"+q.Encode(), b, &w); err != nil {
		return RangeAnswer{}, err
	}
	return w.answer()
}

// AskWindows reads the windows of key starting in [from, to) of a
// windowed store through the instance serving HTTP at endpoint; local
// makes the instance read its own copy only. A refusal is a
// *StatusError.
func AskWindows(ctx context.Context, cl *http.Client, endpoint, store string, key []byte, from, to time.Time, b Bounds, local bool) (RangeAnswer, error) {
	q := boundsQuery(b, local)
	q.Set("window-from", strconv.FormatInt(from.UnixMilli(), 10))
	q.Set("window-to", strconv.FormatInt(to.UnixMilli(), 10))
	var w rangeWireT
	if err := get(ctx, cl, endpoint, "/query/"+url.PathEscape(store)+"/"+url.PathEscape(string(key))+"?"+q.Encode(), b, &w); err != nil {
		return RangeAnswer{}, err
	}
	return w.answer()
}

// boundsQuery is b (and local) as query parameters.
func boundsQuery(b Bounds, local bool) url.Values {
	q := url.Values{}
	if b.MaxLag >= 0 {
		q.Set("max-lag", strconv.FormatInt(b.MaxLag, 10))
	}
	if b.MinOffset > 0 {
		q.Set("min-offset", strconv.FormatInt(b.MinOffset, 10))
	}
	if len(b.MinOffsets) > 0 {
		var parts []string
		for _, t := range slices.Sorted(maps.Keys(b.MinOffsets)) {
			parts = append(parts, t+":"+strconv.FormatInt(b.MinOffsets[t], 10))
		}
		q.Set("min-offsets", strings.Join(parts, ","))
	}
	if b.Timeout > 0 {
		q.Set("timeout", b.Timeout.String())
	}
	if b.Limit > 0 {
		q.Set("limit", strconv.Itoa(b.Limit))
	}
	if local {
		q.Set("local", "true")
	}
	return q
}

// StatusError is an instance's refusal of a read: its HTTP status and
// message. It wraps ErrNoStore (404), ErrBadRequest (400) or
// ErrUnavailable (503).
type StatusError struct {
	Endpoint string
	Code     int
	Message  string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: %d %s: %s", e.Endpoint, e.Code, http.StatusText(e.Code), e.Message)
}

// Unwrap names the kind of refusal.
func (e *StatusError) Unwrap() error {
	switch e.Code {
	case http.StatusNotFound:
		return ErrNoStore
	case http.StatusBadRequest:
		return ErrBadRequest
	case http.StatusServiceUnavailable:
		return ErrUnavailable
	}
	return nil
}

// Ask reads key from store through the instance serving HTTP at
// endpoint (host:port), with bounds b; local makes it answer from its
// own copy only. A refusal is a *StatusError.
func Ask(ctx context.Context, cl *http.Client, endpoint, store string, key []byte, b Bounds, local bool) (Answer, error) {
	q := boundsQuery(b, local)
	var w wire
	if err := get(ctx, cl, endpoint, "/query/"+url.PathEscape(store)+"/"+url.PathEscape(string(key))+"?"+q.Encode(), b, &w); err != nil {
		return Answer{}, err
	}
	return w.answer()
}

// get asks endpoint for path and decodes its JSON answer into out.
func get(ctx context.Context, cl *http.Client, endpoint, path string, b Bounds, out any) error {
	// The instance answers within the timeout; the rest is the network's.
	ctx, cancel := context.WithTimeout(ctx, max(b.Timeout, 0)+5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+endpoint+path, nil)
	if err != nil {
		return err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("%s: reading the answer: %w", endpoint, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			e.Error = string(body)
		}
		return &StatusError{Endpoint: endpoint, Code: resp.StatusCode, Message: e.Error}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s: answer is not JSON: %w", endpoint, err)
	}
	return nil
}
