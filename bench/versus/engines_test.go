package versus

import (
	"os"
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
