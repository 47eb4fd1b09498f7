package web

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/internal/tick"
)

//go:embed assets
var assets embed.FS

// Option configures a Handler.
type Option func(*config)

type config struct {
	gatherer    prometheus.Gatherer
	admin       *kadm.Client
	client      *http.Client
	endpoint    string
	timeline    int
	interval    time.Duration
	peerTimeout time.Duration
}

// WithMetrics serves /metrics from g. Default: no /metrics route.
func WithMetrics(g prometheus.Gatherer) Option { return func(c *config) { c.gatherer = g } }

// WithAdmin reads the group from the cluster through adm (DescribeGroups
// on the app id; the Handler never joins). Default: none, and the page
// shows this instance only. The caller owns adm and closes it.
func WithAdmin(adm *kadm.Client) Option { return func(c *config) { c.admin = adm } }

// WithHTTPClient is the client used to read the other instances' /status.
// Default: a client with no cookies or proxies and the peer timeout.
func WithHTTPClient(cl *http.Client) Option { return func(c *config) { c.client = cl } }

// WithEndpoint is this instance's host:port as others reach it, shown on
// the page before the instance has joined. Default: read from the group.
func WithEndpoint(addr string) Option { return func(c *config) { c.endpoint = addr } }

// WithTimeline keeps the last n rebalances. Default 50.
func WithTimeline(n int) Option { return func(c *config) { c.timeline = max(n, 1) } }

// WithSampleInterval is how often Run reads the group. Default 1s.
func WithSampleInterval(d time.Duration) Option { return func(c *config) { c.interval = d } }

// WithPeerTimeout bounds each read of another instance's /status (an
// unreachable instance is shown from its subscription). Default 1s.
func WithPeerTimeout(d time.Duration) Option { return func(c *config) { c.peerTimeout = d } }

// Handler serves an instance's operator endpoints. Create it with New;
// it is safe for concurrent use.
type Handler struct {
	app *baton.App
	cfg config
	mux *http.ServeMux

	mu struct {
		sync.Mutex
		peaks    map[string]int64
		timeline timeline
		// members is the last decoded record of each member id, shown
		// while a rebalance hides the members' metadata.
		members map[string]Member
	}
}

// New returns the Handler for app.
func New(app *baton.App, opts ...Option) *Handler {
	cfg := config{timeline: 50, interval: time.Second, peerTimeout: time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.client == nil {
		cfg.client = &http.Client{Timeout: cfg.peerTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: 30 * time.Second}}
	}
	h := &Handler{app: app, cfg: cfg, mux: http.NewServeMux()}
	h.mu.peaks = map[string]int64{}
	h.mu.members = map[string]Member{}
	h.mu.timeline.limit = cfg.timeline

	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	h.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "index.html")
	})
	h.mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	h.mux.HandleFunc("GET /status", h.serveStatus)
	h.mux.HandleFunc("GET /group", h.serveGroup)
	h.mux.Handle("/query/", app.QueryHandler())
	if cfg.gatherer != nil {
		h.mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.gatherer, promhttp.HandlerOpts{}))
	}
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Run reads the group every sample interval until ctx ends, so that the
// timeline keeps the rebalances that happen while nobody watches the page.
// It returns nil when ctx ends. Without it the timeline only grows while
// the page is open.
func (h *Handler) Run(ctx context.Context) error {
	return tick.Every(ctx, h.cfg.interval, func() error {
		sctx, cancel := context.WithTimeout(ctx, 2*h.cfg.peerTimeout)
		defer cancel()
		h.Sample(sctx)
		return nil
	})
}

func (h *Handler) serveStatus(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(h.app.Status())
}

func (h *Handler) serveGroup(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*h.cfg.peerTimeout)
	defer cancel()
	v := h.Sample(ctx)
	v.Stores = h.app.Stores()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

// Sample reads the group and every reachable instance's status now and
// returns the merged view (what GET /group serves), recording a new plan
// in the timeline. Errors are part of the view: a group that cannot be
// described or an instance that does not answer is shown as such.
func (h *Handler) Sample(ctx context.Context) View {
	self := h.app.Status()
	var (
		g      *Group
		gErr   error
		peers  = map[string]peer{}
		pmu    sync.Mutex
		wg     sync.WaitGroup
		selfEP = h.cfg.endpoint
	)
	if h.cfg.admin != nil {
		read, err := ReadGroup(ctx, h.cfg.admin, self.AppID)
		if err != nil {
			gErr = err
		} else {
			h.fillPending(&read)
			g = &read
		}
	}
	if g != nil {
		asked := map[string]bool{}
		for _, m := range g.Members {
			s := m.Subscription
			if s.InstanceID == self.Instance {
				if selfEP == "" {
					selfEP = s.Endpoint
				}
				continue
			}
			if s.Endpoint == "" || asked[s.InstanceID] {
				continue
			}
			asked[s.InstanceID] = true
			wg.Add(1)
			go func(id, endpoint string) {
				defer wg.Done()
				st, err := h.fetchStatus(ctx, endpoint)
				p := peer{status: st}
				switch {
				case err != nil:
					p = peer{err: fmt.Sprintf("unreachable at %s: %v; showing its last join", endpoint, err)}
				case st.Instance != id:
					// The endpoint was reused by another process.
					p = peer{err: fmt.Sprintf("%s answers as instance %q; showing its last join", endpoint, st.Instance)}
				}
				pmu.Lock()
				peers[id] = p
				pmu.Unlock()
			}(s.InstanceID, s.Endpoint)
		}
		wg.Wait()
	}
	var ends map[int32]int64
	if h.cfg.admin != nil {
		ends = changelogEnds(ctx, h.cfg.admin, self.AppID)
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	v := merge(self, selfEP, g, gErr, peers, ends, h.mu.peaks, now)
	for i := range v.plans { // every recent round, not only the last
		h.mu.timeline.observe(&v.plans[i], v.Leader, now)
	}
	h.mu.timeline.observe(v.Plan, v.Leader, now)
	v.Timeline = h.mu.timeline.list()
	return v
}

// fillPending replaces members the coordinator shows without metadata
// (mid-rebalance) by their last decoded record, drops those never seen
// decoded (a member joining for the first time shows up once the round
// ends), and remembers the decoded ones.
func (h *Handler) fillPending(g *Group) {
	h.mu.Lock()
	defer h.mu.Unlock()
	kept := g.Members[:0]
	seen := map[string]Member{}
	for _, m := range g.Members {
		if m.Pending {
			old, ok := h.mu.members[m.MemberID]
			if !ok {
				continue
			}
			m = old
		}
		seen[m.MemberID] = m
		kept = append(kept, m)
	}
	g.Members = kept
	h.mu.members = seen
}

func (h *Handler) fetchStatus(ctx context.Context, endpoint string) (*baton.Status, error) {
	return ReadStatus(ctx, h.cfg.client, endpoint)
}

// ReadStatus reads the baton.Status an instance serves at endpoint
// (host:port, as in its subscription) with cl: GET /status.
func ReadStatus(ctx context.Context, cl *http.Client, endpoint string) (*baton.Status, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+endpoint+"/status", nil)
	if err != nil {
		return nil, err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /status: %s", resp.Status)
	}
	var st baton.Status
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&st); err != nil {
		return nil, fmt.Errorf("GET /status: %w", err)
	}
	return &st, nil
}

// changelogEnds returns, by partition, the largest end offset of the app's
// changelog topics (<app-id>-<store>-changelog), or nil when they cannot be
// read; progress then falls back to the largest lag seen.
func changelogEnds(ctx context.Context, adm *kadm.Client, appID string) map[int32]int64 {
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return nil
	}
	var names []string
	for _, name := range topics.Names() {
		if IsChangelog(appID, name) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	listed, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return nil
	}
	out := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > out[o.Partition] {
			out[o.Partition] = o.Offset
		}
	})
	return out
}

// IsChangelog reports whether topic is one of app appID's changelogs,
// named <app-id>-<store>-changelog.
func IsChangelog(appID, topic string) bool {
	return strings.HasPrefix(topic, appID+"-") && strings.HasSuffix(topic, "-changelog") &&
		len(topic) > len(appID)+len("--changelog")
}
