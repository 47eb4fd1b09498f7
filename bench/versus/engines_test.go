package versus

import (
	"os"
	"strings"
	"testing"
)

// TestBaselineCommand: a baseline runs its own binary's `run wordcount`,
// under a command of its own beside this binary's.
func TestBaselineCommand(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base := Baseline(exe)
	cmd, err := buildEngine(base.Engine, base.Exe, "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if cmd.path != exe || len(cmd.pre) != 2 || cmd.pre[0] != "run" || cmd.pre[1] != "wordcount" {
		t.Errorf("baseline command %+v, want %s run wordcount", cmd, exe)
	}
	smooth, err := ParseConfigurations("baton-smooth")
	if err != nil {
		t.Fatal(err)
	}
	if commandKey(base) == commandKey(smooth[0]) {
		t.Errorf("the baseline and baton-smooth share the command key %q", commandKey(base))
	}
}

// TestParseEventsNone: "none" selects no event (a backlog alone); an empty
// list or an unknown name is an error.
func TestParseEventsNone(t *testing.T) {
	if evs, err := ParseEvents("none"); err != nil || len(evs) != 0 {
		t.Errorf(`ParseEvents("none") = %v, %v; want none, no error`, evs, err)
	}
	for _, bad := range []string{"", "scale-sideways"} {
		if _, err := ParseEvents(bad); err == nil {
			t.Errorf("ParseEvents(%q): no error", bad)
		}
	}
	cfg := ShortConfig()
	cfg.Configurations, _ = ParseConfigurations("baton-smooth")
	cfg.Events, cfg.Backlog = nil, 0
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "nothing to measure") {
		t.Errorf("no event and no backlog: %v; want an error saying nothing is measured", err)
	}
}
