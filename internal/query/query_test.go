package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestServes(t *testing.T) {
	active := Copy{Answer: Answer{Role: RoleActive, Offset: 100}}
	restoring := Copy{Answer: Answer{Role: RoleActive, Lag: 5, Offset: 95}, Restoring: true}
	standby := Copy{Answer: Answer{Role: RoleStandby, Lag: 8, Offset: 92}}
	for _, c := range []struct {
		name string
		c    Copy
		b    Bounds
		want bool
	}{
		{"active, default bounds", active, ActiveOnly, true},
		{"restoring active, default bounds", restoring, ActiveOnly, false},
		{"standby, default bounds", standby, ActiveOnly, false},
		{"standby within the lag", standby, Bounds{MaxLag: 8}, true},
		{"standby beyond the lag", standby, Bounds{MaxLag: 7}, false},
		{"restoring active within the lag", restoring, Bounds{MaxLag: 5}, true},
		{"active behind the offset asked for", active, Bounds{MaxLag: -1, MinOffset: 101}, false},
		{"active at the offset asked for", active, Bounds{MaxLag: -1, MinOffset: 100}, true},
		{"standby behind the offset asked for", standby, Bounds{MaxLag: 10, MinOffset: 93}, false},
	} {
		if got := Serves(c.c, c.b); got != c.want {
			t.Errorf("%s: Serves = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestParseBounds(t *testing.T) {
	for _, c := range []struct {
		query string
		want  Bounds
		local bool
		err   string
	}{
		{"", Bounds{MaxLag: -1, Timeout: DefaultTimeout}, false, ""},
		{"max-lag=0&min-offset=7&timeout=250ms&local=true", Bounds{MaxLag: 0, MinOffset: 7, Timeout: 250 * time.Millisecond}, true, ""},
		{"max-lag=-1", Bounds{}, false, `max-lag="-1": want a whole number`},
		{"max-lag=ten", Bounds{}, false, `max-lag="ten"`},
		{"min-offset=1.5", Bounds{}, false, `min-offset="1.5"`},
		{"timeout=5", Bounds{}, false, `timeout="5": want a Go duration`},
		{"timeout=0s", Bounds{}, false, `timeout="0s"`},
		{"timeout=1h", Bounds{}, false, `timeout="1h"`},
		{"local=maybe", Bounds{}, false, `local="maybe"`},
	} {
		q, _ := url.ParseQuery(c.query)
		b, local, err := ParseBounds(q)
		if c.err != "" {
			if err == nil || !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err = %v, want ErrBadRequest naming %s", c.query, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(b, c.want) || local != c.local {
			t.Errorf("%q: %+v %v %v, want %+v %v", c.query, b, local, err, c.want, c.local)
		}
	}
}

// fake is a Source with one store "counts" of four tasks, keyed so that
// a key's task is its first byte modulo 4.
type fake struct {
	instance string
	mu       sync.Mutex
	copies   map[string]Copy // task -> this instance's copy
	peers    []Peer
}

func (f *fake) Instance() string { return f.instance }

func (f *fake) TaskOf(store string, key []byte) (string, error) {
	if store != "counts" {
		return "", errors.Join(ErrNoStore, errors.New(store))
	}
	if len(key) == 0 {
		return "1_0", nil
	}
	return "1_" + string(rune('0'+key[0]%4)), nil
}

func (f *fake) Read(task, store string, key []byte) (Copy, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.copies[task]
	if ok {
		c.Store, c.Key, c.Task, c.Instance = store, key, task, f.instance
		c.Found, c.Value = true, []byte(f.instance)
	}
	return c, ok, nil
}

func (f *fake) Tasks(store string) ([]string, error) {
	if store != "counts" {
		return nil, errors.Join(ErrNoStore, errors.New(store))
	}
	return []string{"1_0", "1_1", "1_2", "1_3"}, nil
}

// ReadRange answers, of task t's copy, the keys t+"a", t+"b" and t+"c"
// (each valued by the instance) in [from, to).
func (f *fake) ReadRange(task, store string, from, to []byte, limit int) (Copy, bool, error) {
	c, ok, _ := f.Read(task, store, nil)
	if !ok {
		return c, false, nil
	}
	c.Key, c.Found, c.Value = nil, false, nil
	for _, k := range []string{task + "a", task + "b", task + "c"} {
		if (from == nil || k >= string(from)) && (to == nil || k < string(to)) {
			if len(c.Entries) == limit {
				c.Truncated = true
				break
			}
			c.Entries = append(c.Entries, Entry{Key: []byte(k), Value: []byte(f.instance), Task: task})
		}
	}
	return c, true, nil
}

// Reads serves every kind of read, but none of a store named "timers".
func (f *fake) Reads(store, kind string) error {
	if store == "timers" {
		return fmt.Errorf("%w: store %q is internal", ErrBadRequest, store)
	}
	return nil
}

func (f *fake) ReadWindows(task, store string, key []byte, from, to time.Time, limit int) (Copy, bool, error) {
	return Copy{}, false, nil
}

func (f *fake) Peers(context.Context) ([]Peer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.peers, nil
}

func (f *fake) set(task string, c Copy) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.copies[task] = c
}

// group starts n instances a, b, ... each with its router served over
// HTTP and knowing the others as peers.
func group(t *testing.T, n int) ([]*fake, []string) {
	var fakes []*fake
	var endpoints []string
	for i := range n {
		f := &fake{instance: string(rune('a' + i)), copies: map[string]Copy{}}
		srv := httptest.NewServer(Handler(NewRouter(f, nil, nil)))
		t.Cleanup(srv.Close)
		fakes = append(fakes, f)
		endpoints = append(endpoints, strings.TrimPrefix(srv.URL, "http://"))
	}
	for _, f := range fakes {
		for j, g := range fakes {
			f.peers = append(f.peers, Peer{Instance: g.instance, Endpoint: endpoints[j]})
		}
	}
	return fakes, endpoints
}

func TestRouterAsksTheInstanceThatCanAnswer(t *testing.T) {
	fakes, endpoints := group(t, 3)
	// "A" (65) is task 1_1: active on c, a standby on b.
	fakes[2].set("1_1", Copy{Answer: Answer{Role: RoleActive, Offset: 50}})
	fakes[1].set("1_1", Copy{Answer: Answer{Role: RoleStandby, Lag: 3, Offset: 47}})
	ctx := context.Background()
	a, err := Ask(ctx, http.DefaultClient, endpoints[0], "counts", []byte("A"), ActiveOnly, false)
	if err != nil || a.Instance != "c" || a.Role != RoleActive || a.Offset != 50 || string(a.Value) != "c" {
		t.Fatalf("through a: %+v, %v; want c's active at 50", a, err)
	}
	// With a lag bound, b's own standby answers at once.
	a, err = Ask(ctx, http.DefaultClient, endpoints[1], "counts", []byte("A"), Bounds{MaxLag: 5}, false)
	if err != nil || a.Instance != "b" || a.Role != RoleStandby {
		t.Fatalf("through b with max-lag 5: %+v, %v; want b's standby", a, err)
	}
	// Beyond the standby's offset, only c's active serves.
	a, err = Ask(ctx, http.DefaultClient, endpoints[1], "counts", []byte("A"), Bounds{MaxLag: 5, MinOffset: 48}, false)
	if err != nil || a.Instance != "c" {
		t.Fatalf("through b with min-offset 48: %+v, %v; want c's active", a, err)
	}
	// Asked locally, a instance without a copy refuses at once.
	began := time.Now()
	_, err = Ask(ctx, http.DefaultClient, endpoints[0], "counts", []byte("A"), ActiveOnly, true)
	if !errors.Is(err, ErrUnavailable) || time.Since(began) > 2*time.Second {
		t.Fatalf("local read on a: %v after %v, want ErrUnavailable at once", err, time.Since(began))
	}
}

func TestRouterWaitsForTheHandover(t *testing.T) {
	fakes, endpoints := group(t, 2)
	// Task 1_1 is between owners: a released it, b has not started it.
	fakes[1].set("1_1", Copy{Answer: Answer{Role: RoleActive, Lag: 40, Offset: 10}, Restoring: true})
	go func() {
		time.Sleep(300 * time.Millisecond)
		fakes[1].set("1_1", Copy{Answer: Answer{Role: RoleActive, Offset: 50}})
	}()
	began := time.Now()
	a, err := Ask(context.Background(), http.DefaultClient, endpoints[0], "counts", []byte("A"), Bounds{MaxLag: -1, Timeout: 5 * time.Second}, false)
	if err != nil || a.Instance != "b" || a.Offset != 50 {
		t.Fatalf("%+v, %v; want b's active once restored", a, err)
	}
	if waited := time.Since(began); waited < 250*time.Millisecond {
		t.Errorf("answered after %v, before the restore ended", waited)
	}
}

func TestRouterRefusals(t *testing.T) {
	fakes, endpoints := group(t, 2)
	fakes[1].set("1_1", Copy{Answer: Answer{Role: RoleLearner, Lag: 400, Offset: 10}})
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + endpoints[0] + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Error string `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("%s: body is not JSON: %v", path, err)
		}
		return resp.StatusCode, body.Error
	}
	for _, c := range []struct {
		path string
		code int
		says string
	}{
		{"/query/nosuch/A", http.StatusNotFound, "no such store"},
		{"/query/counts/A?max-lag=x", http.StatusBadRequest, `max-lag="x"`},
		{"/query/", http.StatusBadRequest, "want /query/STORE/KEY"},
		{"/query/counts?limit=0", http.StatusBadRequest, `limit="0"`},
		{"/query/counts?min-offsets=1_0", http.StatusBadRequest, `min-offsets="1_0": want TASK:OFFSET`},
		{"/query/counts/A?window-from=yesterday", http.StatusBadRequest, `window-from="yesterday"`},
		{"/query/counts?task=9_9", http.StatusBadRequest, `task="9_9"`},
		{"/query/timers/A", http.StatusBadRequest, `store "timers" is internal`},
		{"/query/timers?from=a", http.StatusBadRequest, `store "timers" is internal`},
		{"/query/counts?timeout=200ms", http.StatusServiceUnavailable, "no copy met the bounds"},
		{"/query/counts/A?timeout=200ms", http.StatusServiceUnavailable, "task 1_1: no copy met the bounds (the active, restored) within"},
		{"/query/counts/A?timeout=200ms&max-lag=100", http.StatusServiceUnavailable, "the lowest lag seen was 400"},
	} {
		code, says := get(c.path)
		if code != c.code || !strings.Contains(says, c.says) {
			t.Errorf("%s: %d %q, want %d naming %q", c.path, code, says, c.code, c.says)
		}
	}
}

func TestAnswerWire(t *testing.T) {
	for _, a := range []Answer{
		{Store: "counts", Key: []byte("apple"), Found: true, Value: []byte("3"), Task: "1_2", Instance: "i", Role: RoleActive, Offset: 12345},
		{Store: "counts", Key: []byte("pear"), Task: "1_0", Instance: "i", Role: RoleStandby, Lag: 4, Offset: 7},
		{Store: "counts", Key: []byte("bin"), Found: true, Value: []byte{0xff, 0x00}, Task: "1_1", Instance: "i", Role: RoleLearner},
	} {
		b, err := json.Marshal(toWire(a))
		if err != nil {
			t.Fatal(err)
		}
		var w wire
		if err := json.Unmarshal(b, &w); err != nil {
			t.Fatal(err)
		}
		got, err := w.answer()
		if err != nil || string(got.Value) != string(a.Value) || got.Found != a.Found || got.Offset != a.Offset || got.Task != a.Task {
			t.Errorf("%s: round trip gave %+v, %v", b, got, err)
		}
		if !a.Found && strings.Contains(string(b), `"value`) {
			t.Errorf("%s: a missing key has a value", b)
		}
	}
}

func TestRouterRange(t *testing.T) {
	fakes, endpoints := group(t, 3)
	fakes[0].set("1_0", Copy{Answer: Answer{Role: RoleActive, Offset: 10}})
	fakes[1].set("1_1", Copy{Answer: Answer{Role: RoleActive, Offset: 11}})
	fakes[1].set("1_2", Copy{Answer: Answer{Role: RoleActive, Offset: 12}})
	fakes[2].set("1_3", Copy{Answer: Answer{Role: RoleActive, Offset: 13}})
	ctx := context.Background()
	ra, err := AskRange(ctx, http.DefaultClient, endpoints[0], "counts", []byte("1_0b"), []byte("1_3b"), "", Bounds{MaxLag: -1, Timeout: time.Second}, false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ra.Entries {
		got = append(got, string(e.Key)+"="+string(e.Value)+"@"+e.Task)
	}
	want := []string{"1_0b=a@1_0", "1_0c=a@1_0", "1_1a=b@1_1", "1_1b=b@1_1", "1_1c=b@1_1", "1_2a=b@1_2", "1_2b=b@1_2", "1_2c=b@1_2", "1_3a=c@1_3"}
	if strings.Join(got, " ") != strings.Join(want, " ") || ra.Truncated {
		t.Errorf("range: %v (truncated %v), want %v", got, ra.Truncated, want)
	}
	if len(ra.Tasks) != 4 || ra.Tasks[3].Instance != "c" || ra.Tasks[3].Offset != 13 {
		t.Errorf("tasks: %+v", ra.Tasks)
	}
	ra, err = AskRange(ctx, http.DefaultClient, endpoints[2], "counts", nil, nil, "", Bounds{MaxLag: -1, Limit: 4, Timeout: time.Second}, false)
	if err != nil || len(ra.Entries) != 4 || !ra.Truncated || string(ra.Entries[3].Key) != "1_1a" {
		t.Errorf("limit 4: %+v, %v; want the first 4, truncated", ra, err)
	}
	// Each task's offset bound holds: 1_2 is at 12, so min 13 waits and fails.
	_, err = AskRange(ctx, http.DefaultClient, endpoints[0], "counts", nil, nil, "", Bounds{MaxLag: -1, MinOffsets: map[string]int64{"1_2": 13}, Timeout: 200 * time.Millisecond}, false)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "task 1_2") {
		t.Errorf("min-offsets beyond 1_2's copy: %v, want unavailable naming task 1_2", err)
	}
}
