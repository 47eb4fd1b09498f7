package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// ChaosFailure is a random scenario that broke something.
type ChaosFailure struct {
	Seed     uint64
	Text     string // the scenario, replayable with `baton sim FILE`
	Problems []string
}

// ChaosScenario writes a random scenario drawn from seed: a small group of
// instances with random capacities, racks and restore rates, stateful and
// stateless tasks of random sizes, and a few random events (joins,
// crashes, drains, restarts, capacity changes, slow restorers) in the
// first ten minutes. It never removes the last instance, and restore rates
// stay far above input rates so that every learner can catch up.
func ChaosScenario(seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 0xc4a05))
	var b strings.Builder
	fmt.Fprintf(&b, "name chaos-%d\nseed %d\n", seed, seed)
	fmt.Fprintf(&b, "config standbys=%d max_learners=%d acceptable_lag=%d\n", rng.IntN(3), 1+rng.IntN(4), []int{0, 100, 1000, 10000}[rng.IntN(4)])
	fmt.Fprintf(&b, "timing heartbeat=%dms join=%dms sync=%dms session=%ds probing=%dm\n",
		100+rng.IntN(3000), 10+rng.IntN(200), 10+rng.IntN(200), 5+rng.IntN(40), 1+rng.IntN(10))
	fmt.Fprintf(&b, "limit 12h\n")
	stateful, stateless := 2+rng.IntN(30), rng.IntN(12)
	fmt.Fprintf(&b, "tasks stateful=%d stateless=%d state=1e3..%d rate=%d\n", stateful, stateless, 1000+rng.IntN(2000000), rng.IntN(20))
	n := 1 + rng.IntN(7)
	var live []string
	next := 0
	newID := func() string { next++; return fmt.Sprintf("n%d", next) }
	for range n {
		id := newID()
		live = append(live, id)
		fmt.Fprintf(&b, "instance %s capacity=%d restore=%d rack=r%d\n", id, 1+rng.IntN(3), 20000+rng.IntN(200000), rng.IntN(3))
	}
	at := time.Duration(0)
	events := 1 + rng.IntN(6)
	for range events {
		at += time.Duration(rng.IntN(300)) * time.Second
		pick := func() string { return live[rng.IntN(len(live))] }
		remove := func(id string) {
			for i, x := range live {
				if x == id {
					live = append(live[:i:i], live[i+1:]...)
					return
				}
			}
		}
		switch k := rng.IntN(6); {
		case k == 0 || len(live) < 2:
			id := newID()
			live = append(live, id)
			fmt.Fprintf(&b, "at %v join %s capacity=%d restore=%d rack=r%d\n", at, id, 1+rng.IntN(3), 20000+rng.IntN(200000), rng.IntN(3))
		case k == 1:
			id := pick()
			remove(id)
			fmt.Fprintf(&b, "at %v crash %s\n", at, id)
		case k == 2:
			id := pick()
			remove(id)
			fmt.Fprintf(&b, "at %v leave %s\n", at, id)
		case k == 3:
			id := pick()
			fmt.Fprintf(&b, "at %v restart %s down=%ds\n", at, id, 1+rng.IntN(120))
			// it is away for a while: keep it off the list of instances
			// the next events may pick.
			remove(id)
			defer func() { live = append(live, id) }()
		case k == 4:
			fmt.Fprintf(&b, "at %v capacity %s %d\n", at, pick(), 1+rng.IntN(4))
		default:
			fmt.Fprintf(&b, "at %v slow %s %d\n", at, pick(), 5000+rng.IntN(20000))
		}
	}
	return b.String()
}

// Chaos runs the random scenario of seed under pol with every guarantee
// check on, and returns what went wrong, or nil. Beyond the per-round
// checks it requires convergence: the run ends balanced (under a policy
// with ThreadBalance: it settles before the scenario's limit).
func Chaos(seed uint64, pol Policy) *ChaosFailure {
	text := ChaosScenario(seed)
	f := &ChaosFailure{Seed: seed, Text: text}
	sc, err := ParseString(fmt.Sprintf("chaos-%d", seed), text)
	if err != nil {
		f.Problems = append(f.Problems, "generator wrote a bad scenario: "+err.Error())
		return f
	}
	r, err := Run(sc, pol, Options{Check: true, MaxRounds: 20000})
	if err != nil {
		f.Problems = append(f.Problems, err.Error())
		return f
	}
	const most = 5
	for i, v := range r.Violations {
		if i == most {
			f.Problems = append(f.Problems, fmt.Sprintf("... and %d more violations", len(r.Violations)-most))
			break
		}
		f.Problems = append(f.Problems, v)
	}
	last := r.Series[len(r.Series)-1]
	switch {
	case pol.ThreadBalance && r.End < sc.Limit && last.Unavailable == 0:
		// settled: its own balance
	case !r.Balanced:
		f.Problems = append(f.Problems, fmt.Sprintf("guarantee 10: not balanced at the end (%s): %d tasks unavailable, %d off balance",
			fmtTime(r.End), last.Unavailable, last.OffBalance))
	}
	if len(f.Problems) == 0 {
		return nil
	}
	return f
}
