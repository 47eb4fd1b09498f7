package state

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLockDirSameProcess(t *testing.T) {
	dir := t.TempDir() + "/state" // created by LockDir
	unlock, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockDir(dir)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second LockDir: err = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Errorf("error does not name the directory and holder pid: %v", err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if err := unlock(); err != nil {
		t.Errorf("second unlock: %v", err)
	}
	unlock, err = LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir after unlock: %v", err)
	}
	_ = unlock()
}

// The child side of the cross-process tests, run by re-executing the test
// binary. BATON_LOCK_CHILD is "try" (exit 3 if the dir is locked) or
// "hold" (lock, print "locked", wait for stdin to close).
func TestLockDirChildProcess(t *testing.T) {
	mode, dir := os.Getenv("BATON_LOCK_CHILD"), os.Getenv("BATON_LOCK_DIR")
	if mode == "" {
		t.Skip("helper for TestLockDirOtherProcess")
	}
	unlock, err := LockDir(dir)
	switch {
	case errors.Is(err, ErrLocked):
		fmt.Println(err)
		os.Exit(3)
	case err != nil:
		fmt.Println(err)
		os.Exit(4)
	}
	if mode == "hold" {
		fmt.Println("locked")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	}
	_ = unlock()
	os.Exit(0)
}

func childCommand(mode, dir string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockDirChildProcess$")
	cmd.Env = append(os.Environ(), "BATON_LOCK_CHILD="+mode, "BATON_LOCK_DIR="+dir)
	return cmd
}

func TestLockDirOtherProcess(t *testing.T) {
	dir := t.TempDir()

	// We hold the lock: another process fails fast, naming us.
	unlock, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := childCommand("try", dir).Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("child LockDir while we hold it: %v, output %q; want exit 3 (ErrLocked)", err, out)
	}
	if !strings.Contains(string(out), dir) || !strings.Contains(string(out), "pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("child's error does not name the dir and our pid: %q", out)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}

	// Another process holds it: we fail, until it is killed.
	child := childCommand("hold", dir)
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if s != "locked\n" {
			t.Fatalf("child said %q, want locked", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("child did not take the lock within 30s")
	}
	_, err = LockDir(dir)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(child.Process.Pid)) {
		t.Fatalf("LockDir while the child holds it: err = %v, want ErrLocked naming pid %d", err, child.Process.Pid)
	}
	// A killed holder (as after SIGKILL) releases the lock with its life.
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	unlock, err = LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir after the holder died: %v", err)
	}
	_ = unlock()
}
