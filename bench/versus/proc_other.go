//go:build !unix

package versus

import (
	"os"
	"os/exec"
)

func setGroup(*exec.Cmd) {}

// signalGroup: without process groups, only the process itself is
// signalled (an interrupt for a graceful stop).
func signalGroup(cmd *exec.Cmd, kill bool) {
	if kill {
		_ = cmd.Process.Kill()
		return
	}
	_ = cmd.Process.Signal(os.Interrupt)
}
