package main

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/counts"
	"github.com/baton-streams/baton/internal/tick"
	"github.com/baton-streams/baton/topology"
)

// TestSessionsCommand runs `baton run sessions` as a process: clicks of
// two users with explicit times (ana's last after bo's, within her open
// session's gap), a click without a user, and one click per partition a
// minute later that closes every session. The output holds
// each session once, in the format `--help` gives.
func TestSessionsCommand(t *testing.T) {
	e := clusterWithLines(t)
	p := startBaton(t, "run", "sessions", "--brokers", e.brokers, "--app-id", e.appID, "--input", e.lines,
		"--output", e.counts, "--state-dir", t.TempDir(), "--gap", "10s", "--grace", "2s", "--http", "127.0.0.1:0")
	l := p.waitLine(t, "http: listening on ", 30*time.Second)
	addr := l[strings.LastIndex(l, " ")+1:]
	waitUntil(t, 60*time.Second, "the 8 tasks to run", func() bool { return activeTasks(t, addr) == 8 })

	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	ms := func(s int) string { return strconv.FormatInt(at(s).UnixMilli(), 10) }
	var recs []*kgo.Record
	for _, c := range []struct {
		user, click string
		s           int
	}{
		{"ana", "ana /home", 0}, {"ana", "ana /cart", 8}, {"bo", "bo /home", 9}, {"bo", "bo\t/help", 12},
		{"", " ", 13}, {"ana", "ana /pay", 25}, {"bo", "bo /home", 30}, {"ana", "ana /home", 26},
	} {
		recs = append(recs, &kgo.Record{Topic: e.lines, Key: []byte(c.user), Value: []byte(c.click), Timestamp: at(c.s)})
	}
	closed := map[int32]bool{}
	for i := 0; len(closed) < 4; i++ {
		user := "closer" + strconv.Itoa(i)
		if p := topology.Partition([]byte(user), 4); !closed[p] {
			closed[p] = true
			recs = append(recs, &kgo.Record{Topic: e.lines, Key: []byte(user), Value: []byte(user), Timestamp: at(90)})
		}
	}
	if err := e.client.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ana@" + ms(0):  ms(0) + " " + ms(8) + " 2",
		"ana@" + ms(25): ms(25) + " " + ms(26) + " 2",
		"bo@" + ms(9):   ms(9) + " " + ms(12) + " 2",
		"bo@" + ms(30):  ms(30) + " " + ms(30) + " 1",
	}
	got := map[string][]string{}
	if !tick.Until(context.Background(), 60*time.Second, 300*time.Millisecond, func() bool {
		got = map[string][]string{}
		err := counts.Scan(context.Background(), strings.Split(e.brokers, ","), e.counts, false, func(r *kgo.Record) {
			got[string(r.Key)] = append(got[string(r.Key)], string(r.Value))
		})
		if err != nil {
			t.Fatal(err)
		}
		return len(got) >= len(want)
	}) {
		t.Fatalf("sessions written: %v, want %v", got, want)
	}
	flat := map[string]string{}
	for k, vs := range got {
		flat[k] = strings.Join(vs, " | ")
	}
	if !maps.Equal(flat, want) {
		t.Errorf("sessions written:\n%v\nwant each once:\n%v", flat, want)
	}
	if code := p.stop(t, 60*time.Second); code != 0 {
		t.Errorf("SIGTERM: exit %d, want 0; stderr:\n%s", code, p.stderr)
	}
}

// TestSessionsStartupErrors: the sessions flags are checked before the
// cluster is contacted (the brokers here do not exist), each error one
// line naming the flag; `baton run --help` lists the application.
func TestSessionsStartupErrors(t *testing.T) {
	out, _, code := runBaton(t, "", "run", "--help")
	if code != 0 || !strings.Contains(out, "sessions") {
		t.Errorf("baton run --help: exit %d, output:\n%s\nwant sessions listed", code, out)
	}
	out, _, code = runBaton(t, "", "run", "sessions", "--help")
	for _, s := range []string{"<user>@<start>", "<start> <end> <clicks>", "--gap", "--grace"} {
		if code != 0 || !strings.Contains(out, s) {
			t.Errorf("baton run sessions --help: exit %d, output:\n%s\nwant %q in it", code, out, s)
		}
	}
	base := []string{"run", "sessions", "--brokers", "127.0.0.1:1", "--app-id", "s", "--input", "clicks", "--output", "out",
		"--state-dir", t.TempDir()}
	for _, c := range []struct {
		name, want string
		args       []string
	}{
		{"zero gap", "--gap: must be a positive whole number of milliseconds, got 0s", []string{"--gap", "0s"}},
		{"negative gap", "--gap: must be a positive whole number of milliseconds, got -1s", []string{"--gap", "-1s"}},
		{"fractional gap", "--gap: must be a positive whole number of milliseconds, got 1.5ms", []string{"--gap", "1.5ms"}},
		{"not a gap", "--gap", []string{"--gap", "soon"}},
		{"negative grace", "--grace: must be a whole number of milliseconds >= 0, got -1s", []string{"--grace", "-1s"}},
		{"fractional grace", "--grace: must be a whole number of milliseconds >= 0, got 1µs", []string{"--grace", "1us"}},
		{"output is the input", "--output: must differ from --input (clicks)", []string{"--output", "clicks"}},
		{"bad guarantee", "--guarantee", []string{"--guarantee", "twice"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, errOut, code := runBaton(t, "", append(slices.Clone(base), c.args...)...)
			if code == 0 {
				t.Fatalf("exit 0, want an error")
			}
			if strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "goroutine ") {
				t.Errorf("stderr %q: want one line naming %q", errOut, c.want)
			}
		})
	}
}
