package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestQueryCommand runs two wordcount processes with --http, writes a
// known line, and reads its words with `baton query` through the group,
// through one instance's endpoint (whichever instance holds the task),
// with a lag bound, as JSON, and with bad input.
func TestQueryCommand(t *testing.T) {
	e := clusterWithLines(t)
	p1, addr1 := e.run(t, "--state-dir", t.TempDir(), "--standbys", "1")
	p2, _ := e.run(t, "--state-dir", t.TempDir(), "--standbys", "1")
	defer p1.stop(t, 60*time.Second)
	defer p2.stop(t, 60*time.Second)
	for range 3 {
		if err := e.client.ProduceSync(t.Context(), &kgo.Record{Topic: e.lines, Value: []byte("kiwi kiwi fig")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	group := []string{"query", "--brokers", e.brokers, "--app-id", e.appID, "--store", "counts"}
	waitUntil(t, 60*time.Second, "kiwi counted 6 times", func() bool {
		out, _, code := runBaton(t, "", append(group, "--key", "kiwi", "--timeout", "1s")...)
		return code == 0 && strings.HasPrefix(out, `counts["kiwi"] = 6`)
	})
	out, errOut, code := runBaton(t, "", append(group, "--key", "fig")...)
	if code != 0 || !strings.HasPrefix(out, `counts["fig"] = 3`) || !strings.Contains(out, "served by ") || !strings.Contains(out, "(active, lag 0)") {
		t.Errorf("query fig: exit %d, %q %q", code, out, errOut)
	}
	// Every key through one instance: the other's tasks are forwarded.
	for _, key := range []string{"kiwi", "fig"} {
		out, errOut, code = runBaton(t, "", "query", "--endpoint", addr1, "--store", "counts", "--key", key, "--json")
		var a struct {
			Found  bool   `json:"found"`
			Value  string `json:"value"`
			Role   string `json:"role"`
			Task   string `json:"task"`
			Offset int64  `json:"offset"`
		}
		if err := json.Unmarshal([]byte(out), &a); code != 0 || err != nil || !a.Found || a.Role != "active" || !strings.HasPrefix(a.Task, "1_") || a.Offset <= 0 {
			t.Errorf("query %s --endpoint --json: exit %d, %q %q (%v)", key, code, out, errOut, err)
		}
	}
	// A range over every task: fig and kiwi, and the copy of each task.
	out, errOut, code = runBaton(t, "", append(group, "--from", "f", "--to", "l")...)
	if code != 0 || !strings.Contains(out, `counts["fig"] = 3  (task 1_`) || !strings.Contains(out, `counts["kiwi"] = 6  (task 1_`) ||
		strings.Count(out, "served by") != 4 {
		t.Errorf("range [f, l): exit %d, %q %q", code, out, errOut)
	}
	out, _, code = runBaton(t, "", append(group, "--from", "f", "--limit", "1")...)
	if code != 0 || !strings.HasPrefix(out, `counts["fig"] = 3`) || !strings.Contains(out, "raise --limit") {
		t.Errorf("range from f, limit 1: exit %d, %q", code, out)
	}
	out, _, code = runBaton(t, "", append(group, "--key", "absent word", "--max-lag", "1000")...)
	if code != 0 || !strings.HasPrefix(out, `counts["absent word"]: not found`) {
		t.Errorf("query of a missing key: exit %d, %q", code, out)
	}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"query", "--brokers", e.brokers, "--app-id", e.appID, "--key", "fig"}, 2, "--store: required"},
		{[]string{"query", "--brokers", e.brokers, "--app-id", e.appID, "--store", "counts"}, 2, "--key, or --from and --to for a range: required"},
		{append(group, "--key", "fig", "--from", "a"), 2, "a range read has no --key"},
		{append(group, "--window-from", "0"), 2, "a window read needs --key"},
		{append(group, "--key", "fig", "--window-from", "last week"), 2, `window-from="last week"`},
		{append(group, "--from", "a", "--limit", "0"), 2, "--limit: must be from 1"},
		{[]string{"query", "--store", "counts", "--key", "fig"}, 2, "--brokers and --app-id, or --endpoint"},
		{append(group, "--key", "fig", "--max-lag", "-3"), 2, "--max-lag: must be >= 0"},
		{append(group, "--key", "fig", "--timeout", "0s"), 2, "--timeout: must be > 0"},
		{[]string{"query", "--brokers", e.brokers, "--app-id", e.appID, "--store", "sums", "--key", "fig"}, 1, `no such store: "sums" (the application's stores: [counts])`},
		{[]string{"query", "--brokers", e.brokers, "--app-id", e.appID + "-none", "--store", "counts", "--key", "fig"}, 1, "has no members"},
		{append(group, "--key", "fig", "--min-offset", "999999999", "--timeout", "300ms"), 1, "no copy met the bounds"},
	} {
		_, errOut, code := runBaton(t, "", c.args...)
		if code != c.code || !strings.Contains(errOut, c.says) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("baton %s: exit %d, stderr %q; want exit %d and one line naming %q", strings.Join(c.args, " "), code, errOut, c.code, c.says)
		}
	}
}
