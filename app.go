package baton

import (
	"context"
	"fmt"

	"github.com/baton-streams/baton/internal/engine"
	"github.com/baton-streams/baton/internal/errs"
	"github.com/baton-streams/baton/internal/query"
	"github.com/baton-streams/baton/topology"
)

// Errors returned by Run.
var (
	// ErrBrokers: no broker answered within 10 s.
	ErrBrokers = errs.ErrBrokers
	// ErrAuth: the brokers refused the credentials (WithSASL).
	ErrAuth = errs.ErrAuth
	// ErrRunning: Run was called a second time.
	ErrRunning = engine.ErrRunning
	// ErrInstanceIDInUse: another instance joined the group with this
	// instance's id (WithInstanceID) and took its place.
	ErrInstanceIDInUse = engine.ErrInstanceIDInUse
)

// App runs one instance of a topology: one consumer-group member whose
// workers run the tasks the group's leader assigns it. Its runtime lives
// in internal/engine ("Where things live" in the package doc).
type App struct {
	e *engine.App
	q *query.Router
}

// New checks the options and prepares an App. Nothing is contacted until
// Run. An invalid option makes it return an error wrapping ErrConfig that
// names the option.
func New(top *topology.Topology, opts ...Option) (*App, error) {
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
	if top == nil {
		return nil, fmt.Errorf("%w: topology: nil", ErrConfig)
	}
	if cfg.AppID == "" {
		cfg.AppID = top.AppID()
	}
	if err := validate(&cfg); err != nil {
		return nil, err
	}
	if err := checkProcessorErrors(&cfg, top); err != nil {
		return nil, err
	}
	e, err := engine.New(top, cfg)
	if err != nil {
		return nil, err
	}
	return &App{e: e, q: query.NewRouter(e.QuerySource(), nil, e.QueryObserver())}, nil
}

// InstanceID returns the instance's id.
func (a *App) InstanceID() string { return a.e.InstanceID() }

// Leave makes a draining App leave at once, without waiting for its tasks
// to move (the second SIGTERM).
func (a *App) Leave() { a.e.Leave() }

// Run joins the group and processes until ctx is done, then drains: the
// instance marks itself leaving, waits (up to the drain timeout, or until
// Leave) for its active tasks to move to warm copies, commits, leaves the
// group and returns nil; with StopForRestart it commits and returns
// without leaving. It returns an error if the brokers cannot be reached
// within 10 s, if the state directory is locked, if the brokers refuse
// the session timeout, if another instance took its instance id
// (ErrInstanceIDInUse), or if processing fails (a store on a failing disk:
// state.ErrFailed). Under exactly-once a fenced producer, or an abort
// not done within 30 s, does not stop it: it closes its tasks and joins
// again with new clients (baton_member_restarts_total). Run may be called
// once (ErrRunning); every goroutine it started has stopped when it
// returns.
func (a *App) Run(ctx context.Context) error { return a.e.Run(ctx) }

// Status returns a snapshot of the instance. Safe to call at any time from
// any goroutine.
func (a *App) Status() Status { return publicStatus(a.e.Status()) }
