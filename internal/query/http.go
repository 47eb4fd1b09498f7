package query

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
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

// MarshalJSON writes a as the instances serve it (docs/queries.md).
func (a Answer) MarshalJSON() ([]byte, error) { return json.Marshal(toWire(a)) }

func toWire(a Answer) wire {
	w := wire{Store: a.Store, Key: string(a.Key), Found: a.Found, Task: a.Task, Instance: a.Instance, Role: a.Role, Lag: a.Lag, Offset: a.Offset}
	if a.Found {
		if utf8.Valid(a.Value) {
			v := string(a.Value)
			w.Value = &v
		} else {
			v := base64.StdEncoding.EncodeToString(a.Value)
			w.ValueBase64 = &v
		}
	}
	return w
}

func (w wire) answer() (Answer, error) {
	a := Answer{Store: w.Store, Key: []byte(w.Key), Found: w.Found, Task: w.Task, Instance: w.Instance, Role: w.Role, Lag: w.Lag, Offset: w.Offset}
	switch {
	case w.Value != nil:
		a.Value = []byte(*w.Value)
	case w.ValueBase64 != nil:
		v, err := base64.StdEncoding.DecodeString(*w.ValueBase64)
		if err != nil {
			return Answer{}, fmt.Errorf("value_base64: %w", err)
		}
		a.Value = v
	}
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
		store, key, err := splitPath(req.URL)
		if err != nil {
			fail(w, http.StatusBadRequest, err)
			return
		}
		b, local, err := ParseBounds(req.URL.Query())
		if err != nil {
			fail(w, http.StatusBadRequest, err)
			return
		}
		a, err := r.Get(req.Context(), store, []byte(key), b, local)
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
			_ = json.NewEncoder(w).Encode(a)
		}
	})
}

// splitPath reads STORE and KEY from /query/STORE/KEY, each
// path-escaped; the key may hold slashes once escaped (%2F).
func splitPath(u *url.URL) (store, key string, err error) {
	p := u.EscapedPath()
	const prefix = "/query/"
	if len(p) < len(prefix) || p[:len(prefix)] != prefix {
		return "", "", fmt.Errorf("%w: path %q: want /query/STORE/KEY", ErrBadRequest, u.Path)
	}
	rest := p[len(prefix):]
	i := 0
	for i < len(rest) && rest[i] != '/' {
		i++
	}
	if i == 0 || i == len(rest) {
		return "", "", fmt.Errorf("%w: path %q: want /query/STORE/KEY", ErrBadRequest, u.Path)
	}
	if store, err = url.PathUnescape(rest[:i]); err == nil {
		key, err = url.PathUnescape(rest[i+1:])
	}
	if err != nil {
		return "", "", fmt.Errorf("%w: path %q: %v", ErrBadRequest, u.Path, err)
	}
	return store, key, nil
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
	q := url.Values{}
	if b.MaxLag >= 0 {
		q.Set("max-lag", strconv.FormatInt(b.MaxLag, 10))
	}
	if b.MinOffset > 0 {
		q.Set("min-offset", strconv.FormatInt(b.MinOffset, 10))
	}
	if b.Timeout > 0 {
		q.Set("timeout", b.Timeout.String())
	}
	if local {
		q.Set("local", "true")
	}
	u := "http://" + endpoint + "/query/" + url.PathEscape(store) + "/" + url.PathEscape(string(key)) + "?" + q.Encode()
	// The instance answers within the timeout; the rest is the network's.
	ctx, cancel := context.WithTimeout(ctx, max(b.Timeout, 0)+5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Answer{}, err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return Answer{}, fmt.Errorf("%s: reading the answer: %w", endpoint, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			e.Error = string(body)
		}
		return Answer{}, &StatusError{Endpoint: endpoint, Code: resp.StatusCode, Message: e.Error}
	}
	var w wire
	if err := json.Unmarshal(body, &w); err != nil {
		return Answer{}, fmt.Errorf("%s: answer is not JSON: %w", endpoint, err)
	}
	return w.answer()
}
