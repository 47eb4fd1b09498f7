package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/counts"
	"github.com/baton-streams/baton/internal/tick"
	"github.com/baton-streams/baton/topology"
)

// pvWindow is the window of the page-views test; its grace (24 h) is far
// longer than the event time the test spans, so no view can be late
// however the views of different partitions are interleaved.
const pvWindow = time.Second

// runPageviews starts `baton run pageviews` on the test's topics (views
// on e.lines, the windowed counts on e.counts) with extra flags and
// returns the process and its HTTP address.
func (e *e2e) runPageviews(t *testing.T, users string, extra ...string) (*proc, string) {
	t.Helper()
	args := append([]string{"run", "pageviews", "--brokers", e.brokers, "--app-id", e.appID, "--input", e.lines,
		"--users", users, "--output", e.counts, "--window", pvWindow.String(), "--grace", "24h", "--http", "127.0.0.1:0"}, extra...)
	p := startBaton(t, args...)
	l := p.waitLine(t, "http: listening on ", 30*time.Second)
	return p, l[strings.LastIndex(l, " ")+1:]
}

// startViewFlow writes 20 views a batch and expects, per region window,
// how many views fall into it. View n is by user n*7 mod 230 and has the
// event time start + n ms: users u0..u199 are in the table, u200..u229
// are not (region "unknown").
func (e *e2e) startViewFlow(region map[string]string, start time.Time) *flow {
	return e.startFlow(func(i int) ([]*kgo.Record, map[string]int64) {
		var recs []*kgo.Record
		add := map[string]int64{}
		for n := i * 20; n < i*20+20; n++ {
			u := "u" + strconv.Itoa(n*7%230)
			ts := start.Add(time.Duration(n) * time.Millisecond)
			r, ok := region[u]
			if !ok {
				r = topology.UnknownRegion
			}
			add[windowedKey(r, ts)]++
			recs = append(recs, &kgo.Record{Topic: e.lines, Key: []byte(u), Value: []byte("/page/" + strconv.Itoa(n%13)), Timestamp: ts})
		}
		return recs, add
	})
}

// windowedKey is the output key of region's window holding ts.
func windowedKey(region string, ts time.Time) string {
	ms := ts.UnixMilli()
	return string(binary.BigEndian.AppendUint64([]byte(region), uint64(ms-ms%pvWindow.Milliseconds())))
}

// readable names the windowed keys of m as region@window start (ms).
func readable[V any](t *testing.T, m map[string]V) map[string]V {
	t.Helper()
	codec := topology.WindowedCodec(topology.String, pvWindow)
	out := map[string]V{}
	for k, v := range m {
		w, err := codec.Decode([]byte(k))
		if err != nil {
			t.Fatalf("output key %q: %v", k, err)
		}
		out[fmt.Sprintf("%s@%d", w.Key, w.Start.UnixMilli())] = v
	}
	return out
}

// TestPageViewsScaleOutAndDrain runs `baton run pageviews --guarantee
// exactly-once` as separate processes: a users table is loaded, then
// views flow with explicit timestamps while the group scales out from
// one process to two and three, and one of them drains (SIGTERM). Every
// region's count in every window must end at the number of views written
// for it, and its committed history must be exactly 1..n: each view
// joined with its user's region, and counted in its window, once.
func TestPageViewsScaleOutAndDrain(t *testing.T) {
	e := clusterWithLines(t)
	users := e.lines + "-users"
	resp, err := kadm.NewClient(e.client).CreateTopic(context.Background(), 4, -1,
		map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, users)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating %s: %v", users, err)
	}
	// The users do not change while views flow: a task joins its views
	// with the table in the order records are fetched.
	regions := []string{"eu", "us", "asia", "africa", "oceania"}
	region := map[string]string{}
	var recs []*kgo.Record
	for i := range 200 {
		u := "u" + strconv.Itoa(i)
		region[u] = regions[i*i%len(regions)]
		recs = append(recs, &kgo.Record{Topic: users, Key: []byte(u), Value: []byte(region[u])})
	}
	if err := e.client.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	run := func() (*proc, string) {
		return e.runPageviews(t, users, "--state-dir", t.TempDir(), "--session-timeout", "2s", "--guarantee", "exactly-once")
	}
	shared := func(addrs ...string) func() bool {
		return func() bool {
			for _, addr := range addrs {
				if activeTasks(t, addr) == 0 {
					return false
				}
			}
			return activeTasks(t, addrs...) == 8
		}
	}
	a, aAddr := run()
	waitUntil(t, 60*time.Second, "a to run the 8 tasks", shared(aAddr))
	f := e.startViewFlow(region, time.Now().Truncate(time.Minute))
	f.more(t, 2000)
	b, bAddr := run()
	waitUntil(t, 60*time.Second, "a and b to share the 8 tasks", shared(aAddr, bAddr))
	f.more(t, 2000)
	c, cAddr := run()
	waitUntil(t, 60*time.Second, "a, b and c to share the 8 tasks", shared(aAddr, bAddr, cAddr))
	f.more(t, 2000)
	if code := a.stop(t, 60*time.Second); code != 0 {
		t.Errorf("a: SIGTERM: exit %d, want 0; stderr:\n%s", code, a.stderr)
	}
	waitUntil(t, 60*time.Second, "b and c to share the 8 tasks", shared(bAddr, cAddr))
	f.more(t, 2000)
	want := f.end(t)
	views := int64(0)
	for _, n := range want {
		views += n
	}
	t.Logf("%d views in %d region windows", views, len(want))

	var got map[string]int64
	if !tick.Until(context.Background(), 60*time.Second, 300*time.Millisecond, func() bool {
		got, err = counts.Read(context.Background(), strings.Split(e.brokers, ","), e.counts)
		if err != nil {
			t.Fatal(err)
		}
		return maps.Equal(got, want)
	}) {
		got, want := readable(t, got), readable(t, want)
		bad := 0
		for k, n := range want {
			if got[k] != n && bad < 10 {
				t.Errorf("%s: %d views, want %d", k, got[k], n)
				bad++
			}
		}
		for k, n := range got {
			if _, ok := want[k]; !ok && bad < 10 {
				t.Errorf("%s: %d views, want none", k, n)
				bad++
			}
		}
		t.Fatalf("views per region per window not exact after 60s")
	}
	seqs, err := counts.Sequences(context.Background(), strings.Split(e.brokers, ","), e.counts)
	if err != nil {
		t.Fatal(err)
	}
	if bad := counts.Exact(readable(t, seqs), readable(t, want), 10); bad != nil {
		t.Fatalf("the committed output is not exactly 1..n per region and window (final counts are right):\n%s", strings.Join(bad, "\n"))
	}
	for _, addr := range []string{bAddr, cAddr} {
		if n := metric(t, addr, "baton_late_records_total"); n != 0 {
			t.Errorf("%s: %v late views, want none", addr, n)
		}
	}
	for _, p := range []*proc{b, c} {
		if code := p.stop(t, 60*time.Second); code != 0 {
			t.Errorf("SIGTERM: exit %d, want 0; stderr:\n%s", code, p.stderr)
		}
	}
}

// TestPageViewsStartupErrors: the page-views flags are checked before the
// cluster is contacted (the brokers here do not exist), each error one
// line naming the flag; `baton run --help` lists both applications.
func TestPageViewsStartupErrors(t *testing.T) {
	out, _, code := runBaton(t, "", "run", "--help")
	if code != 0 || !strings.Contains(out, "wordcount") || !strings.Contains(out, "pageviews") {
		t.Errorf("baton run --help: exit %d, output:\n%s\nwant both wordcount and pageviews", code, out)
	}
	base := []string{"run", "pageviews", "--brokers", "127.0.0.1:1", "--app-id", "pv", "--input", "views", "--output", "out",
		"--state-dir", t.TempDir()}
	for _, c := range []struct {
		name, want string
		args       []string
	}{
		{"missing users", `"users"`, nil},
		{"empty users", "--users: must not be empty", []string{"--users", " "}},
		{"users is the input", "--users: must differ from --input", []string{"--users", "views"}},
		{"users is the output", "--users: must differ from --output", []string{"--users", "out"}},
		{"zero window", "--window: must be a positive whole number of milliseconds, got 0s", []string{"--users", "u", "--window", "0s"}},
		{"fractional window", "--window: must be a positive whole number of milliseconds, got 1.5ms", []string{"--users", "u", "--window", "1.5ms"}},
		{"not a window", "--window", []string{"--users", "u", "--window", "soon"}},
		{"negative grace", "--grace: must be a whole number of milliseconds >= 0, got -1s", []string{"--users", "u", "--grace", "-1s"}},
		{"bad guarantee", "--guarantee", []string{"--users", "u", "--guarantee", "twice"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, errOut, code := runBaton(t, "", append(base, c.args...)...)
			if code == 0 {
				t.Fatalf("exit 0, want an error")
			}
			if strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "goroutine ") {
				t.Errorf("stderr %q: want one line naming %q", errOut, c.want)
			}
		})
	}
}
