package web

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/cluster"
	"github.com/baton-streams/baton/internal/tick"
	"github.com/baton-streams/baton/topology"
)

// group is an embedded cluster with a 4-partition wordcount on it.
type group struct {
	t       *testing.T
	brokers []string
	adm     *kadm.Client
}

const (
	appID  = "wc"
	input  = "lines"
	output = "counts"
)

func newGroup(t *testing.T) *group {
	t.Helper()
	c, err := cluster.Start("127.0.0.1:0", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	g := &group{t: t, brokers: c.Addrs(), adm: kadm.NewClient(cl)}
	ctx := context.Background()
	if _, err := g.adm.CreateTopic(ctx, 4, 1, nil, input); err != nil {
		t.Fatal(err)
	}
	compact := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	if _, err := g.adm.CreateTopic(ctx, 4, 1, compact, output); err != nil {
		t.Fatal(err)
	}
	return g
}

// prefill writes n lines of one distinct word each, so every count task
// has n/4 records of state to restore.
func (g *group) prefill(n int) {
	g.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(g.brokers...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		g.t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		w := "w" + strconv.Itoa(i)
		recs = append(recs, &kgo.Record{Topic: input, Key: []byte(w), Value: []byte(w)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		g.t.Fatal(err)
	}
}

// instance is one running App with the web Handler on its own listener,
// the endpoint it advertises to the group.
type instance struct {
	app *baton.App
	url string
}

func (g *group) start(id string) *instance {
	g.t.Helper()
	top, err := topology.WordCount(appID, input, output)
	if err != nil {
		g.t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.t.Fatal(err)
	}
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelInfo
	}
	reg := prometheus.NewRegistry()
	app, err := baton.New(top, baton.WithBrokers(g.brokers...), baton.WithAppID(appID), baton.WithInstanceID(id),
		baton.WithStateDir(g.t.TempDir()), baton.WithSessionTimeout(2*time.Second), baton.WithHeartbeatInterval(100*time.Millisecond),
		baton.WithAcceptableLag(10), baton.WithRebalanceTimeout(3*time.Second), baton.WithEndpoint(ln.Addr().String()),
		baton.WithMetrics(reg), baton.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))))
	if err != nil {
		g.t.Fatal(err)
	}
	srv := &http.Server{Handler: New(app, WithAdmin(g.adm), WithMetrics(reg), WithPeerTimeout(500*time.Millisecond)),
		ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	g.t.Cleanup(func() {
		cancel()
		app.Leave()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			g.t.Errorf("instance %s did not stop", id)
		}
		_ = srv.Close()
	})
	return &instance{app: app, url: "http://" + ln.Addr().String()}
}

// eventually waits for cond, checking every 50ms, and fails the test with
// what when timeout passes first.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !tick.Until(context.Background(), timeout, 50*time.Millisecond, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}
