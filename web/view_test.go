package web

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/lifecycle"
	"github.com/baton-streams/baton/protocol"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func instanceOf(v View, id string) (InstanceView, bool) {
	for _, iv := range v.Instances {
		if iv.ID == id {
			return iv, true
		}
	}
	return InstanceView{}, false
}

// A member whose endpoint does not answer is shown from its subscription,
// marked, and the leader's plan comes from the peer that says it leads.
func TestMergeUnreachableAndLeader(t *testing.T) {
	self := baton.Status{AppID: "wc", Instance: "a", Generation: 6, Workers: 1,
		Tasks: []baton.TaskStatus{{ID: "1_0", Role: "active", Processed: 5}}}
	plan := &baton.PlanStatus{Generation: 7, Reasons: []string{"learner 1_1 on c: c warms a copy first"}}
	peers := map[string]peer{
		"b": {status: &baton.Status{AppID: "wc", Instance: "b", Generation: 7, Leader: true, Plan: plan,
			Tasks: []baton.TaskStatus{{ID: "1_1", Role: "active"}}}},
		"c": {err: "unreachable at 127.0.0.1:1: connection refused; showing its last join"},
	}
	g := &Group{State: "Stable", Members: []Member{
		{Subscription: protocol.Subscription{InstanceID: "a", Endpoint: "127.0.0.1:10", Capacity: 1}},
		{Subscription: protocol.Subscription{InstanceID: "b", Endpoint: "127.0.0.1:11", Capacity: 2}},
		{Subscription: protocol.Subscription{InstanceID: "c", Endpoint: "127.0.0.1:1", Capacity: 1,
			Learner: []string{"1_1"}, Lags: map[string]int64{"1_1": 400}}},
	}}
	peaks := map[string]int64{}
	v := merge(self, "", g, nil, peers, map[int32]int64{1: 1000}, peaks, t0)
	if v.Leader != "b" || v.Plan != plan || v.Generation != 7 {
		t.Fatalf("leader %q plan %v generation %d; want b, b's plan, 7", v.Leader, v.Plan, v.Generation)
	}
	c, ok := instanceOf(v, "c")
	if !ok || c.Source != "subscription" || !strings.Contains(c.Error, "unreachable") {
		t.Fatalf("c = %+v; want it from its subscription, marked unreachable", c)
	}
	if len(c.Tasks) != 1 || c.Tasks[0].Role != lifecycle.Learner || c.Tasks[0].Lag != 400 || c.Tasks[0].Progress != 0.6 {
		t.Fatalf("c's tasks = %+v; want learner 1_1 lag 400 at 60%% of a 1000-record changelog", c.Tasks)
	}
	a, _ := instanceOf(v, "a")
	if !a.Self || !a.Member || a.Endpoint != "127.0.0.1:10" || len(a.Tasks) != 1 {
		t.Fatalf("a = %+v", a)
	}
	if b, _ := instanceOf(v, "b"); !b.Leader || b.Workers != 2 || b.Source != "status" {
		t.Fatalf("b = %+v", b)
	}
}

// A task's role is its name in /group's JSON; a role this build does not
// know, from a newer peer's status, shows the task with no role and says
// so on the instance.
func TestMergeRoles(t *testing.T) {
	self := baton.Status{AppID: "wc", Instance: "a",
		Tasks: []baton.TaskStatus{{ID: "1_0", Role: "active"}, {ID: "1_1", Role: "standby"}, {ID: "1_2", Role: "learner", Lag: 5}}}
	peers := map[string]peer{"b": {status: &baton.Status{AppID: "wc", Instance: "b",
		Tasks: []baton.TaskStatus{{ID: "1_0", Role: "observer"}}}}}
	g := &Group{Members: []Member{
		{Subscription: protocol.Subscription{InstanceID: "a"}},
		{Subscription: protocol.Subscription{InstanceID: "b"}},
	}}
	v := merge(self, "", g, nil, peers, nil, map[string]int64{}, t0)
	a, _ := instanceOf(v, "a")
	b, err := json.Marshal(a.Tasks)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"id":"1_0","role":"active","lag":0,"processed":0,"progress":1},` +
		`{"id":"1_1","role":"standby","lag":0,"processed":0,"progress":1},` +
		`{"id":"1_2","role":"learner","lag":5,"processed":0,"progress":0}]`
	if string(b) != want {
		t.Fatalf("a's tasks in JSON:\n%s\nwant\n%s", b, want)
	}
	var back []TaskView
	if err := json.Unmarshal(b, &back); err != nil || len(back) != 3 || back[2].Role != lifecycle.Learner {
		t.Fatalf("decoding a's tasks: %+v, %v", back, err)
	}
	if p, _ := instanceOf(v, "b"); len(p.Tasks) != 1 || p.Tasks[0].Role != lifecycle.None || !strings.Contains(p.Error, `"observer"`) {
		t.Fatalf("b = %+v; want its task with no role and an error naming the role", p)
	}
}

// Members come and go: an instance that left disappears with its progress
// memory; a group that cannot be read still shows this instance.
func TestMergeMembersComeAndGo(t *testing.T) {
	self := baton.Status{AppID: "wc", Instance: "a"}
	peaks := map[string]int64{}
	withC := &Group{Members: []Member{
		{Subscription: protocol.Subscription{InstanceID: "a"}},
		{Subscription: protocol.Subscription{InstanceID: "c", Learner: []string{"1_2"}, Lags: map[string]int64{"1_2": 800}}},
	}}
	merge(self, "", withC, nil, nil, nil, peaks, t0)
	if peaks["c/1_2"] != 800 {
		t.Fatalf("peaks = %v; want c/1_2 = 800", peaks)
	}
	withC.Members[1].Subscription.Lags["1_2"] = 200
	v := merge(self, "", withC, nil, nil, nil, peaks, t0)
	if c, _ := instanceOf(v, "c"); c.Tasks[0].Progress != 0.75 {
		t.Fatalf("progress %v; want 0.75 (lag 800 -> 200)", c.Tasks[0].Progress)
	}
	v = merge(self, "", &Group{Members: withC.Members[:1]}, nil, nil, nil, peaks, t0)
	if _, ok := instanceOf(v, "c"); ok || len(peaks) != 0 {
		t.Fatalf("c left but is still shown (%v) or remembered (%v)", v.Instances, peaks)
	}
	v = merge(self, "", nil, errors.New("brokers down"), nil, nil, peaks, t0)
	if len(v.Instances) != 1 || v.Instances[0].ID != "a" || v.GroupError == "" || v.Instances[0].Member {
		t.Fatalf("without the group: %+v", v)
	}
}

func TestTimeline(t *testing.T) {
	tl := timeline{limit: 2}
	p5 := &baton.PlanStatus{Generation: 5, Followup: true, Instances: []baton.PlanInstance{
		{ID: "a", Revoked: []string{"0_2"}}, {ID: "c", Learner: []string{"1_2"}}},
		Reasons: []string{"learner 1_2 on c: warms first", "orphan 0_1 on b: orphaned", "revoke 0_2 on a: moves to c"}}
	if !tl.observe(p5, "a", t0) || tl.observe(p5, "a", t0) {
		t.Fatal("a plan is recorded once")
	}
	r := tl.list()[0]
	if len(r.Revoked) != 1 || r.Revoked[0] != (Move{"0_2", "a"}) || len(r.Learners) != 1 || r.Learners[0] != (Move{"1_2", "c"}) ||
		len(r.Orphans) != 1 || r.Orphans[0] != (Move{"0_1", "b"}) || len(r.Reasons) != 3 {
		t.Fatalf("entry %+v", r)
	}
	if tl.observe(&baton.PlanStatus{Generation: 4}, "b", t0) {
		t.Fatal("a deposed leader's older plan must not be recorded")
	}
	tl.observe(&baton.PlanStatus{Generation: 6}, "a", t0)
	tl.observe(&baton.PlanStatus{Generation: 7}, "a", t0)
	if l := tl.list(); len(l) != 2 || l[0].Generation != 7 || l[1].Generation != 6 {
		t.Fatalf("bounded, newest first: %+v", l)
	}
	if !tl.observe(&baton.PlanStatus{Generation: 1}, "x", t0) || len(tl.list()) != 1 {
		t.Fatalf("a recreated group starts a new timeline: %+v", tl.list())
	}
}

// The handler against a live group: /status is the App's Status, /group
// merges a peer whose endpoint stopped answering, and the page and its
// assets are served from the binary.
func TestHandlerLive(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and two instances")
	}
	g := newGroup(t)
	a := g.start("a")
	g.start("b")
	h := New(a.app, WithAdmin(g.adm), WithPeerTimeout(300*time.Millisecond))
	srv := httptest.NewServer(h)
	defer srv.Close()

	get := func(path string) []byte {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		return body
	}
	group := func() View {
		var v View
		if err := json.Unmarshal(get("/group"), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	eventually(t, 60*time.Second, "both instances, live, with a leader", func() bool {
		v := group()
		ia, okA := instanceOf(v, "a")
		ib, okB := instanceOf(v, "b")
		return okA && okB && ia.Source == "status" && ib.Source == "status" && v.Leader != "" && len(v.Timeline) > 0
	})
	var st baton.Status
	if err := json.Unmarshal(get("/status"), &st); err != nil || st.Instance != "a" || st.AppID != "wc" {
		t.Fatalf("/status = %+v, %v", st, err)
	}
	for _, path := range []string{"/", "/assets/app.js", "/assets/style.css"} {
		if len(get(path)) == 0 {
			t.Fatalf("GET %s: empty", path)
		}
	}
	// b's endpoint is gone while b stays in the group: the page shows b
	// from its last join, and says so.
	h.cfg.client.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return nil, errors.New("connection refused")
	})
	var ib InstanceView
	eventually(t, 30*time.Second, "b shown from its last assignment, marked unreachable", func() bool {
		ib, _ = instanceOf(group(), "b")
		return ib.Source == "subscription" && strings.Contains(ib.Error, "unreachable") && len(ib.Tasks) > 0
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The group's input lag sums the active tasks of the instances read
// live, takes the largest seconds behind, and is marked partial when an
// instance was shown from its subscription; the recommendation is the
// leader's.
func TestMergeGroupInputAndAutoscale(t *testing.T) {
	self := baton.Status{AppID: "wc", Instance: "a", Generation: 3, Workers: 1, WorkerRate: 40,
		Tasks: []baton.TaskStatus{
			{ID: "0_0", Role: "active", Input: &baton.InputLag{Records: 100, Seconds: 2.5, Rate: 30}},
			{ID: "0_1", Role: "standby"},
		}}
	auto := &baton.AutoscaleStatus{DesiredInstances: 4, Needed: 4, Reason: "scale out 2 → 4"}
	peers := map[string]peer{
		"b": {status: &baton.Status{AppID: "wc", Instance: "b", Generation: 3, Leader: true, Autoscale: auto, WorkerRate: 50,
			Restore: baton.RestoreStatus{Records: 900, Rate: 300, YieldedSeconds: 1.5},
			Tasks:   []baton.TaskStatus{{ID: "0_1", Role: "active", Input: &baton.InputLag{Records: 20, Seconds: 7, Rate: 12}}}}},
	}
	g := &Group{State: "Stable", Members: []Member{
		{Subscription: protocol.Subscription{InstanceID: "a", Endpoint: "127.0.0.1:10", Capacity: 1}},
		{Subscription: protocol.Subscription{InstanceID: "b", Endpoint: "127.0.0.1:11", Capacity: 1}},
	}}
	v := merge(self, "", g, nil, peers, nil, map[string]int64{}, t0)
	want := GroupInput{Records: 120, Seconds: 7, Rate: 42}
	if v.Input != want || v.Autoscale != auto {
		t.Fatalf("input %+v autoscale %v; want %+v and b's recommendation", v.Input, v.Autoscale, want)
	}
	if b, _ := instanceOf(v, "b"); b.WorkerRate != 50 || b.Tasks[0].Input == nil || b.Tasks[0].Input.Records != 20 ||
		b.Restore == nil || *b.Restore != (baton.RestoreStatus{Records: 900, Rate: 300, YieldedSeconds: 1.5}) {
		t.Errorf("b = %+v; want its worker rate, its restores and its task's input lag", b)
	}

	// c answers nothing: its active task is not counted, and the total
	// says so.
	g.Members = append(g.Members, Member{Subscription: protocol.Subscription{InstanceID: "c", Capacity: 1}, HasAssignment: true,
		Assignment: protocol.Assignment{Active: []string{"0_2"}}})
	v = merge(self, "", g, nil, peers, nil, map[string]int64{}, t0)
	if want.Partial = true; v.Input != want {
		t.Errorf("input %+v; want %+v", v.Input, want)
	}
}
