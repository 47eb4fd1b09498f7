package versus

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/sim"
)

// The figures the simulator predicts for a run, as named in
// Prediction.Ratios.
const (
	FigureTimeToBalance  = "time_to_balance"
	FigureUnavailable    = "stateful_unavailable_task_seconds"
	FigureMaxUnavailable = "max_stateful_unavailable"
	FigureRestored       = "restored_critical"
)

// Where a model parameter came from.
const (
	FromEvent   = "event"   // measured in the event's window
	FromRun     = "run"     // measured in the configuration's other events
	FromAssumed = "assumed" // not measured: the simulator's default
)

// Model is how the simulator models an engine configuration: a policy of
// `baton sim` and the configuration's settings that the model uses.
type Model struct {
	Policy        string        `json:"policy"`
	Heartbeat     time.Duration `json:"heartbeat_ns"`
	Session       time.Duration `json:"session_ns"`
	Commit        time.Duration `json:"commit_ns"`
	Probing       time.Duration `json:"probing_ns,omitempty"`
	AcceptableLag int64         `json:"acceptable_lag"`
	MaxLearners   int           `json:"max_learners"`
}

// Kafka Streams' defaults that the model uses (StreamsConfig and the
// consumer's ConsumerConfig in 4.4).
const (
	ksHeartbeat     = 3 * time.Second
	ksSession       = 45 * time.Second
	ksCommit        = 30 * time.Second // at-least-once; exactly-once: 100 ms
	ksCommitEOS     = 100 * time.Millisecond
	ksProbing       = 10 * time.Minute
	ksAcceptableLag = 10_000
	ksMaxWarmups    = 2
)

// ModelOf returns the simulator's model of conf under guarantee, or why
// the simulator has none.
func ModelOf(conf Configuration, guarantee string) (Model, error) {
	arg := func(name string) (string, bool) {
		for i, a := range conf.Args {
			if a == name && i+1 < len(conf.Args) {
				return conf.Args[i+1], true
			}
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				return v, true
			}
		}
		return "", false
	}
	num := func(name string, dst *int64) error {
		v, ok := arg(name)
		if !ok {
			return nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("versus: %s: %s %q is not a count", conf.Name, name, v)
		}
		*dst = n
		return nil
	}
	switch conf.Engine {
	case "baton":
		m := Model{Policy: string(assign.Smooth), Heartbeat: baton.DefaultHeartbeatInterval, Session: baton.DefaultSessionTimeout,
			Commit: baton.DefaultCommitInterval, AcceptableLag: assign.DefaultAcceptableLag, MaxLearners: assign.DefaultMaxLearners}
		if p, ok := arg("--policy"); ok {
			m.Policy = p
		}
		if _, err := sim.ParsePolicy(m.Policy); err != nil {
			return Model{}, fmt.Errorf("versus: %s: %w", conf.Name, err)
		}
		return m, nil
	case "kstreams":
		if p, ok := arg("--group-protocol"); ok && p != "classic" {
			return Model{}, fmt.Errorf("versus: %s: the simulator models Kafka Streams' classic protocol and its HighAvailabilityTaskAssignor, not the %s protocol's broker-side assignor", conf.Name, p)
		}
		m := Model{Policy: "probing", Heartbeat: ksHeartbeat, Session: ksSession, Commit: ksCommit, Probing: ksProbing,
			AcceptableLag: ksAcceptableLag, MaxLearners: ksMaxWarmups}
		if guarantee == "exactly-once" {
			m.Commit = ksCommitEOS
		}
		var probing, warmups int64 = -1, -1
		if err := num("--probing-interval-ms", &probing); err != nil {
			return Model{}, err
		}
		if err := num("--acceptable-lag", &m.AcceptableLag); err != nil {
			return Model{}, err
		}
		if err := num("--max-warmups", &warmups); err != nil {
			return Model{}, err
		}
		if probing > 0 {
			m.Probing = time.Duration(probing) * time.Millisecond
		}
		if warmups >= 0 {
			m.MaxLearners = int(warmups)
		}
		return m, nil
	}
	return Model{}, fmt.Errorf("versus: %s: the simulator has no model of %s", conf.Name, conf.Engine)
}

// Params are the model's parameters of one run: the configuration's
// model and the restore rate measured from the status lines.
type Params struct {
	Model Model `json:"model"`
	// RestoreRate is records/s: the growth of the instances' restored
	// counts (records restored into active tasks) over the time they
	// spent restoring, from their restore_ms (RestoreClocked), or else
	// over the status-line intervals in which the counts grew: a restore
	// fills only part of its first and last interval, so that is a lower
	// bound of the rate.
	RestoreRate    float64       `json:"restore_rate"`
	RestoreRecords int64         `json:"restore_records"`
	RestoreTime    time.Duration `json:"restore_time_ns"`
	RestoreClocked bool          `json:"restore_clocked"`
	RestoreFrom    string        `json:"restore_from"`
	// State is each stateful task's changelog length at the event, Rate
	// its records/s: the lines processed by then and the input rate,
	// times the words per line, over the partitions.
	State int64   `json:"state"`
	Rate  float64 `json:"rate"`
}

// Prediction is what the simulator predicts for one run, beside what the
// run measured of the same figures from outside.
type Prediction struct {
	Scenario string `json:"scenario"`
	Params   Params `json:"params"`
	// Predicted. Balanced and TimeToBalance are the model's SharesHeld
	// and TimeToShares, as the run's balance is measured.
	Balanced           bool               `json:"balanced"`
	TimeToBalance      time.Duration      `json:"time_to_balance_ns"`
	UnavailableSeconds float64            `json:"stateful_unavailable_task_seconds"`
	MaxUnavailable     int                `json:"max_stateful_unavailable"`
	RestoredCritical   float64            `json:"restored_critical"`
	Rounds             int                `json:"rounds"`
	Measured           Measured           `json:"measured"`
	Ratios             map[string]float64 `json:"ratios"`
	Error              string             `json:"error,omitempty"`
}

// Measured are the figures of a run compared with the prediction, from
// outside: TimeToBalance from the status lines (the run's figure), the
// count tasks' unavailability from their output partitions' gaps, the
// restored records from the status lines. Until is the end of the span
// measured (since the event): the last moment every output partition
// was still being written.
type Measured struct {
	Balanced           bool          `json:"balanced"`
	TimeToBalance      time.Duration `json:"time_to_balance_ns"`
	UnavailableSeconds float64       `json:"stateful_unavailable_task_seconds"`
	MaxUnavailable     int           `json:"max_stateful_unavailable"`
	Restored           *int64        `json:"restored"`
	Until              time.Duration `json:"until_ns"`
}

// pause is one stall of an output partition after an event: from
// (not before the event) to to, in excess of the normal gap.
type pause struct {
	from, to time.Duration
	excess   time.Duration
}

// pauses returns each partition's stalls in (ev.At, until]: the gaps
// between arrivals longer than twice the longest gap of the steady
// window, each counted from the event at the earliest, less the steady
// median gap (the model processes continuously; a partition's normal
// rhythm is not unavailability). Twice: output that comes in bursts (a
// producer's linger) has, over minutes, many gaps a little longer than
// the longest of a 30 s window, and none of them is a stop.
func pauses(rec Recording, ev Event, until time.Duration) [][]pause {
	byPart := make([][]time.Duration, rec.Partitions)
	for _, a := range rec.Arrivals {
		if a.Partition >= 0 && a.Partition < rec.Partitions {
			byPart[a.Partition] = append(byPart[a.Partition], a.At)
		}
	}
	out := make([][]pause, rec.Partitions)
	for p, ats := range byPart {
		median, longest := steadyGaps(ats, ev.At-ev.Steady, ev.At)
		for i := 1; i < len(ats); i++ {
			from, to := ats[i-1], ats[i]
			if to <= ev.At || from >= until {
				continue
			}
			to = min(to, until)
			if to-from <= 2*longest {
				continue
			}
			from = max(from, ev.At)
			if ex := to - from - median; ex > 0 {
				out[p] = append(out[p], pause{from: from, to: to, excess: ex})
			}
		}
	}
	return out
}

// measure computes the Measured figures of run r.
func measure(r Run) Measured {
	rec, ev := *r.Recording, r.Window
	m := Measured{Balanced: r.Figures.Balanced, TimeToBalance: r.Figures.TimeToBalance}
	// Up to the earliest of the partitions' last arrivals: every
	// partition was still being written up to there (input stops before
	// the recording ends).
	until := time.Duration(math.MaxInt64)
	last := make([]time.Duration, rec.Partitions)
	for _, a := range rec.Arrivals {
		if a.Partition >= 0 && a.Partition < rec.Partitions {
			last[a.Partition] = max(last[a.Partition], a.At)
		}
	}
	for _, at := range last {
		until = min(until, at)
	}
	if len(last) == 0 || until <= ev.At {
		return m
	}
	m.Until = until - ev.At
	type edge struct {
		at    time.Duration
		delta int
	}
	var edges []edge
	for _, ps := range pauses(rec, ev, until) {
		for _, p := range ps {
			m.UnavailableSeconds += p.excess.Seconds()
			edges = append(edges, edge{p.from, 1}, edge{p.to, -1})
		}
	}
	// An end before a start at the same instant: pauses that only touch
	// were not at once.
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta)) })
	cur := 0
	for _, e := range edges {
		cur += e.delta
		m.MaxUnavailable = max(m.MaxUnavailable, cur)
	}
	if n, ok := RestoredIn(rec.Status, ev.At, until); ok {
		m.Restored = &n
	}
	return m
}

// measureRestore sums the growth of each instance's restored count over
// the intervals between its consecutive status lines that end in (from,
// to] and in which it grew, and the time spent restoring in them: the
// growth of the instance's restore_ms where both lines give it (at least
// a millisecond), else the interval's length. clocked says every interval
// counted had restore_ms.
func measureRestore(status []Status, from, to time.Duration) (records int64, busy time.Duration, clocked bool) {
	prev := map[string]Status{}
	clocked = true
	for _, s := range status {
		if s.At > to {
			break
		}
		name := s.Line.Instance
		p, ok := prev[name]
		prev[name] = s
		if !ok || s.At <= from || s.Line.Restored == nil || p.Line.Restored == nil {
			continue
		}
		if d := *s.Line.Restored - *p.Line.Restored; d > 0 {
			records += d
			if s.Line.RestoreMS != nil && p.Line.RestoreMS != nil {
				busy += time.Duration(max(*s.Line.RestoreMS-*p.Line.RestoreMS, 1)) * time.Millisecond
			} else {
				busy += s.At - p.At
				clocked = false
			}
		}
	}
	return records, busy, clocked && records > 0
}

// Predict runs the simulator on every run of res that has a recording
// and whose configuration it models, and sets the runs' Prediction. With
// dir set, it writes each run's scenario there. A run the simulator
// cannot model gets a Prediction with only Error set.
func Predict(res *Result, dir string) error {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("versus: sim scenarios: %w", err)
		}
	}
	confs := map[string]Configuration{}
	for _, c := range res.Config.Configurations {
		confs[c.Name] = c
	}
	for i := range res.Runs {
		r := &res.Runs[i]
		if r.Recording == nil || r.Window.Name == "" {
			continue
		}
		conf, ok := confs[r.Configuration]
		if !ok {
			conf, ok = findConfiguration(r.Configuration)
		}
		if !ok {
			r.Prediction = &Prediction{Error: fmt.Sprintf("unknown configuration %q", r.Configuration)}
			continue
		}
		model, err := ModelOf(conf, res.Config.Guarantee)
		if err != nil {
			r.Prediction = &Prediction{Error: err.Error()}
			continue
		}
		pr, err := predictRun(res, i, model, dir)
		if err != nil {
			return err
		}
		r.Prediction = pr
	}
	return nil
}

func findConfiguration(name string) (Configuration, bool) {
	all := Configurations()
	i := slices.IndexFunc(all, func(c Configuration) bool { return c.Name == name })
	if i < 0 {
		return Configuration{}, false
	}
	return all[i], true
}

// predictRun writes the scenario of run i and runs the simulator on it.
func predictRun(res *Result, i int, model Model, dir string) (*Prediction, error) {
	r := res.Runs[i]
	rec, ev, cfg := *r.Recording, r.Window, res.Config
	pr := &Prediction{Measured: measure(r), Ratios: map[string]float64{}}
	p := Params{Model: model, RestoreFrom: FromEvent}
	until := ev.At + max(pr.Measured.Until, ev.After)
	p.RestoreRecords, p.RestoreTime, p.RestoreClocked = measureRestore(rec.Status, ev.At, until)
	if p.RestoreRecords == 0 || p.RestoreTime <= 0 {
		p.RestoreFrom, p.RestoreRecords, p.RestoreTime, p.RestoreClocked = FromRun, 0, 0, true
		for _, o := range res.Runs {
			if o.Configuration != r.Configuration || o.Event == r.Event || o.Recording == nil || o.Window.Name == "" {
				continue
			}
			n, d, clocked := measureRestore(o.Recording.Status, o.Window.At, lastStatus(o.Recording.Status))
			p.RestoreRecords += n
			p.RestoreTime += d
			if n > 0 {
				p.RestoreClocked = p.RestoreClocked && clocked
			}
		}
	}
	if p.RestoreRecords > 0 && p.RestoreTime > 0 {
		p.RestoreRate = float64(p.RestoreRecords) / p.RestoreTime.Seconds()
	} else {
		p.RestoreFrom, p.RestoreRate = FromAssumed, sim.DefaultRestoreRate
	}
	parts := float64(max(cfg.Partitions, 1))
	p.State = int64(math.Round(float64(ProcessedAt(rec.Status, ev.At)) * float64(cfg.WordsPerLine) / parts))
	p.Rate = float64(cfg.Rate) * float64(cfg.WordsPerLine) / parts
	pr.Params = p
	text := scenarioText(r, cfg, p, latest(rec.Status, ev.At), processes(rec.Status))
	name := fmt.Sprintf("%s-%s.txt", r.Configuration, r.Event)
	pr.Scenario = name
	if dir != "" {
		pr.Scenario = filepath.Join(dir, name)
		if err := os.WriteFile(pr.Scenario, []byte(text), 0o644); err != nil {
			return nil, fmt.Errorf("versus: writing the sim scenario of %s %s: %w", r.Configuration, r.Event, err)
		}
	}
	out, err := sim.RunText(pr.Scenario, text, model.Policy)
	if err != nil {
		pr.Error = err.Error()
		return pr, nil
	}
	// The run's balance is read from the status lines: who runs which
	// count task, warm-ups and restores aside. The model's figure to
	// compare is the same one (not its stricter time to balance, which
	// also waits for learners and restores to end).
	pr.Balanced, pr.TimeToBalance = out.SharesHeld, out.TimeToShares
	pr.UnavailableSeconds, pr.MaxUnavailable = out.UnavailableStatefulSeconds, out.MaxUnavailableStateful
	pr.RestoredCritical, pr.Rounds = out.RestoredCritical, out.Rebalances
	ratio := func(name string, pred, meas float64) {
		if meas > 0 && !math.IsNaN(pred) && !math.IsInf(pred, 0) {
			pr.Ratios[name] = pred / meas
		}
	}
	m := pr.Measured
	if pr.Balanced && m.Balanced {
		ratio(FigureTimeToBalance, pr.TimeToBalance.Seconds(), m.TimeToBalance.Seconds())
	}
	ratio(FigureUnavailable, pr.UnavailableSeconds, m.UnavailableSeconds)
	ratio(FigureMaxUnavailable, float64(pr.MaxUnavailable), float64(m.MaxUnavailable))
	if m.Restored != nil {
		ratio(FigureRestored, pr.RestoredCritical, float64(*m.Restored))
	}
	return pr, nil
}

// processes maps each instance to the process id its status lines gave,
// the last one if it changed; instances that gave none are missing.
func processes(status []Status) map[string]string {
	m := map[string]string{}
	for _, s := range status {
		if s.Line.Process != "" {
			m[s.Line.Instance] = s.Line.Process
		}
	}
	return m
}

// processAttr is the scenario attribute that gives instance name its
// process id, or "" if none is known.
func processAttr(process map[string]string, name string) string {
	if id := process[name]; id != "" {
		return " process=" + id
	}
	return ""
}

func lastStatus(status []Status) time.Duration {
	if len(status) == 0 {
		return 0
	}
	return status[len(status)-1].At
}

// scenarioText is the scenario of run r: the group as its status lines
// showed it at the event, the event, and the model's parameters.
func scenarioText(r Run, cfg Config, p Params, before map[string]StatusLine, process map[string]string) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	m := p.Model
	line("# Written by baton bench versus: %s, %s (app id %s), the group as its status lines", r.Configuration, r.Event, r.AppID)
	line("# showed it at the event, with the model's parameters from the run.")
	line("# Run it with: baton sim FILE --policy %s", m.Policy)
	line("name versus %s: %s", r.Configuration, r.Event)
	line("config standbys=%d max_learners=%d acceptable_lag=%d", shapeOf(r.Event).standbys, m.MaxLearners, m.AcceptableLag)
	line("# heartbeat, session, commit%s: the configuration's settings.", map[bool]string{true: ", probing", false: ""}[m.Probing > 0])
	line("# join, sync, start: assumed (the simulator's defaults): a run measured from outside does not show them.")
	t := fmt.Sprintf("timing heartbeat=%v session=%v commit=%v", m.Heartbeat, m.Session, m.Commit)
	if m.Probing > 0 {
		t += fmt.Sprintf(" probing=%v", m.Probing)
	}
	line("%s", t)
	switch p.RestoreFrom {
	case FromAssumed:
		line("# restore: assumed (the simulator's default): no status line showed a restore into an active task.")
	default:
		where := "in this event"
		if p.RestoreFrom == FromRun {
			where = "in the configuration's other events (none in this one)"
		}
		if p.RestoreClocked {
			line("# restore: %d records restored into active tasks %s, in %v spent restoring", p.RestoreRecords, where, p.RestoreTime.Round(time.Millisecond))
			line("# (the growth of the instances' restore_ms).")
		} else {
			line("# restore: %d records restored into active tasks %s, over %v of status-line intervals", p.RestoreRecords, where, p.RestoreTime.Round(time.Millisecond))
			line("# in which an instance's restored count grew (a lower bound of the rate).")
		}
	}
	line("# state: the lines processed by the event times %d words, over %d partitions;", cfg.WordsPerLine, cfg.Partitions)
	line("# rate: %d lines/s times %d words, over the partitions.", cfg.Rate, cfg.WordsPerLine)
	for q := range cfg.Partitions {
		line("task 0_%d stateless", q)
		line("task 1_%d state=%d rate=%.1f", q, p.State, p.Rate)
	}
	restore := fmt.Sprintf("%.0f", math.Max(1, p.RestoreRate))
	line("# beat: not seen from outside; half a heartbeat, the expected wait at a random phase.")
	if len(process) > 0 {
		line("# process: the engine's id of each instance, which orders the clients of its assignor.")
	}
	for _, name := range slices.Sorted(maps.Keys(before)) {
		s := before[name]
		l := fmt.Sprintf("instance %s restore=%s beat=%v", name, restore, m.Heartbeat/2) + processAttr(process, name)
		if act := slices.Sorted(slices.Values(s.Active)); len(act) > 0 {
			l += " active=" + strings.Join(act, ",")
		}
		if sb := slices.Sorted(slices.Values(s.Standby)); len(sb) > 0 {
			l += " standby=" + strings.Join(sb, ",")
		}
		line("%s", l)
	}
	switch r.Event {
	case "scale-out":
		line("at 0s join c restore=%s%s", restore, processAttr(process, "c"))
	case "scale-in":
		line("at 0s leave c")
	default:
		line("at 0s crash c")
	}
	line("limit 1h")
	return b.String()
}
