package versus

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Configuration is one engine with its settings: a row of the tables.
type Configuration struct {
	Name string `json:"name"`
	// Engine is "baton" (this binary's `run wordcount`) or a peer's
	// folder under compare/.
	Engine string   `json:"engine"`
	Args   []string `json:"args,omitempty"`
	// Exe, for engine baton, is another baton binary to run instead of
	// this one: a baseline build measured side by side (see Baseline).
	Exe string `json:"exe,omitempty"`
	// BrokerConfig is what the cluster needs for this configuration; the
	// harness sets it when it starts the cluster itself.
	BrokerConfig map[string]string `json:"broker_config,omitempty"`
}

// Configurations are the known configurations, in table order.
func Configurations() []Configuration {
	return []Configuration{
		{Name: "baton-smooth", Engine: "baton"},
		{Name: "baton-cooperative", Engine: "baton", Args: []string{"--policy", "cooperative"}},
		{Name: "baton-eager", Engine: "baton", Args: []string{"--policy", "eager"}},
		{Name: "kstreams", Engine: "kstreams"},
		{Name: "kstreams-probe1m", Engine: "kstreams", Args: []string{"--probing-interval-ms", "60000"}},
		// The streams rebalance protocol (KIP-1071): Apache Kafka 4.4
		// enables it by default (group.coordinator.rebalance.protocols).
		{Name: "kstreams-streams", Engine: "kstreams", Args: []string{"--group-protocol", "streams"}},
		{Name: "goka", Engine: "goka"},
	}
}

// Baseline is the configuration that runs the baton binary exe (another
// build: the one a change is measured against) as baton-smooth runs this
// one.
func Baseline(exe string) Configuration {
	return Configuration{Name: "baton-baseline", Engine: "baton", Exe: exe}
}

// ParseConfigurations selects configurations by name, comma-separated, in
// the order given.
func ParseConfigurations(list string) ([]Configuration, error) {
	all := Configurations()
	var out []Configuration
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		i := slices.IndexFunc(all, func(c Configuration) bool { return c.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("versus: unknown engine configuration %q (known: %s)", name, strings.Join(names(all), ", "))
		}
		if slices.ContainsFunc(out, func(c Configuration) bool { return c.Name == name }) {
			return nil, fmt.Errorf("versus: engine configuration %q given twice", name)
		}
		out = append(out, all[i])
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("versus: no engine configuration in %q", list)
	}
	return out, nil
}

func names(cs []Configuration) []string {
	var n []string
	for _, c := range cs {
		n = append(n, c.Name)
	}
	return n
}

// Events are the scale events a run can script, in table order.
var Events = []string{"scale-out", "scale-in", "kill-standby1", "kill-standby0"}

// ParseEvents selects events by name, comma-separated; "none" selects
// none (a run of the backlog alone).
func ParseEvents(list string) ([]string, error) {
	if strings.TrimSpace(list) == "none" {
		return nil, nil
	}
	var out []string
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !slices.Contains(Events, name) {
			return nil, fmt.Errorf("versus: unknown event %q (known: %s)", name, strings.Join(Events, ", "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("versus: no event in %q", list)
	}
	return out, nil
}

// command is how to start one instance of an engine: an executable and
// the arguments before the contract's flags.
type command struct {
	path string
	pre  []string
}

// PeerAvailable reports whether compare/<peer>/build.sh exists under
// compareDir.
func PeerAvailable(compareDir, peer string) bool {
	st, err := os.Stat(filepath.Join(compareDir, peer, "build.sh"))
	return err == nil && !st.IsDir()
}

// buildEngine returns how to start engine: baton is batonExe's
// `run wordcount`; a peer is built by compare/<peer>/build.sh into
// outDir.
func buildEngine(engine, batonExe, compareDir, outDir string) (command, error) {
	if engine == "baton" {
		st, err := os.Stat(batonExe)
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return command{}, fmt.Errorf("versus: baton binary %s: not an executable file", batonExe)
		}
		return command{path: batonExe, pre: []string{"run", "wordcount"}}, nil
	}
	if !PeerAvailable(compareDir, engine) {
		return command{}, fmt.Errorf("versus: engine %s: %s not found",
			engine, filepath.Join(compareDir, engine, "build.sh"))
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return command{}, err
	}
	abs, err := filepath.Abs(outDir)
	if err != nil {
		return command{}, err
	}
	cmd := exec.Command("bash", filepath.Join(compareDir, engine, "build.sh"), abs)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return command{}, fmt.Errorf("versus: building engine %s: %v\n%s", engine, err, tail(string(out), 30))
	}
	path := filepath.Join(abs, engine)
	if _, err := os.Stat(path); err != nil {
		return command{}, fmt.Errorf("versus: building engine %s: build.sh left no %s", engine, path)
	}
	return command{path: path}, nil
}

func tail(s string, lines int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}
