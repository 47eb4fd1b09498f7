package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-streams/baton/internal/kafkatest"
)

// batonBin is the baton binary built once for the command tests, which
// run it as a user would: as a process, reading its exit code and output.
var batonBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "baton-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	batonBin = filepath.Join(dir, "baton")
	if out, err := exec.Command("go", "build", "-o", batonBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building baton: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	kafkatest.StopShared()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runBaton runs the binary with stdin and returns stdout, stderr and the
// exit code.
func runBaton(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(batonBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}
