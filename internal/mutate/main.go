// Command mutate plants small faults in baton's code, one at a time, and
// runs the tests that should catch each. A fault the tests let through is
// a hole in the suite: a promise nothing guards.
//
//	go run ./internal/mutate            # every fault
//	go run ./internal/mutate -list      # the faults and the tests named for each
//	go run ./internal/mutate -only alo-ack-wait,warm-copy-skip
//
// Each fault is one small edit (a line dropped, a condition changed) to a
// file of the runtime, the assignor or the state package, and names the
// tests expected to catch it. mutate applies the edit, runs those tests
// (go test -count=1 -run ...), puts the file back, and reports, for each
// fault, which test failed and its first failure line, or MISSED. A
// fault whose text is no longer found in its file is reported as STALE:
// the code moved on and the list must follow. A fault that does not
// build is reported as such. The exit status is 1 when any fault was
// missed, stale or did not build.
//
// mutate works on a copy of the module (the files git knows of, tracked
// or not ignored) in a temporary directory, so the working tree is never
// changed and other work can go on in it meanwhile. The tests run
// against whatever cluster the environment names (BATON_KAFKA, see
// internal/kafkatest); the default is the embedded one.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	list := flag.Bool("list", false, "list the faults and their tests, and exit")
	only := flag.String("only", "", "comma-separated fault names to run (default: all)")
	timeout := flag.Duration("timeout", 15*time.Minute, "go test -timeout for each run")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "mutate: unexpected argument %q (flags: -list, -only, -timeout)\n", flag.Arg(0))
		os.Exit(2)
	}
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
	chosen, err := choose(faults, *only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
	if *list {
		for _, f := range chosen {
			fmt.Printf("%-26s %s\n%-26s %s\n", f.name, f.what, "", f.testsText())
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	work, err := copyModule(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
	defer os.RemoveAll(work)
	bad := 0
	for _, f := range chosen {
		if ctx.Err() != nil {
			break
		}
		start := time.Now()
		r := run(ctx, work, f, *timeout)
		fmt.Printf("%-26s %-8s %6.1fs  %s\n", f.name, r.verdict, time.Since(start).Seconds(), r.detail)
		if r.verdict != "caught" {
			bad++
		}
	}
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(os.Stderr, "mutate: interrupted")
	case bad > 0:
		fmt.Printf("%d of %d faults not caught\n", bad, len(chosen))
	default:
		fmt.Printf("all %d faults caught\n", len(chosen))
		return
	}
	os.RemoveAll(work) // os.Exit skips the deferred removal
	os.Exit(1)
}

// fault is one planted bug: old, found exactly once in file, becomes new.
type fault struct {
	name, what string
	file       string
	old, new   string
	tests      []tests
}

// tests is one go test run: a package and a -run pattern.
type tests struct{ pkg, run string }

func (f fault) testsText() string {
	var s []string
	for _, t := range f.tests {
		s = append(s, fmt.Sprintf("go test %s -run '%s'", t.pkg, t.run))
	}
	return strings.Join(s, "; ")
}

func choose(all []fault, only string) ([]fault, error) {
	if only == "" {
		return all, nil
	}
	byName := map[string]fault{}
	for _, f := range all {
		byName[f.name] = f
	}
	var out []fault
	for _, n := range strings.Split(only, ",") {
		f, ok := byName[strings.TrimSpace(n)]
		if !ok {
			return nil, fmt.Errorf("-only: no fault named %q (see -list)", n)
		}
		out = append(out, f)
	}
	return out, nil
}

type result struct{ verdict, detail string }

// copyModule copies the files git knows of in root (tracked, or untracked
// and not ignored) into a new temporary directory and returns it.
func copyModule(root string) (string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("listing the module's files (git ls-files): %w", err)
	}
	work, err := os.MkdirTemp("", "baton-mutate-")
	if err != nil {
		return "", err
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err == nil {
			err = os.MkdirAll(filepath.Join(work, filepath.Dir(name)), 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(work, name), data, 0o644)
		}
		if err != nil {
			os.RemoveAll(work)
			return "", fmt.Errorf("copying %s: %w", name, err)
		}
	}
	return work, nil
}

// run plants f in the copy, runs its tests until one fails, and restores
// the file.
func run(ctx context.Context, root string, f fault, timeout time.Duration) result {
	path := filepath.Join(root, f.file)
	orig, err := os.ReadFile(path)
	if err != nil {
		return result{"error", err.Error()}
	}
	if n := bytes.Count(orig, []byte(f.old)); n != 1 {
		return result{"STALE", fmt.Sprintf("%s: the text to change is found %d times, want once", f.file, n)}
	}
	mutated := bytes.Replace(orig, []byte(f.old), []byte(f.new), 1)
	if err := os.WriteFile(path, mutated, 0o644); err != nil {
		return result{"error", err.Error()}
	}
	defer func() {
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "mutate: restoring %s in the copy: %v\n", f.file, err)
		}
	}()
	var missed []string
	for _, t := range f.tests {
		out, err := goTest(ctx, root, t, timeout)
		logs := filepath.Join(os.TempDir(), "baton-mutate-"+f.name+".log")
		_ = os.WriteFile(logs, out, 0o644)
		if ctx.Err() != nil {
			return result{"error", "interrupted"}
		}
		if err == nil {
			missed = append(missed, t.run)
			continue
		}
		if bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]")) {
			return result{"NO BUILD", firstLine(out, func(l string) bool { return strings.Contains(l, ".go:") })}
		}
		return result{"caught", fmt.Sprintf("go test %s -run '%s': %s (output: %s)", t.pkg, t.run, failure(out), logs)}
	}
	return result{"MISSED", "passed: " + strings.Join(missed, "; ")}
}

func goTest(ctx context.Context, root string, t tests, timeout time.Duration) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-timeout", timeout.String(), "-run", t.run, t.pkg)
	cmd.Dir = root
	cmd.WaitDelay = 10 * time.Second
	return cmd.CombinedOutput()
}

// failure names the first test that failed with the first and the last
// of its lines from _test.go files (its output mixes logs and errors; an
// error or a Fatal usually comes first or ends it), or the panic.
func failure(out []byte) string {
	var name string
	var lines []string
	say := func() string {
		switch len(lines) {
		case 0:
			return name
		case 1:
			return name + ": " + trim(lines[0])
		}
		return fmt.Sprintf("%s: %s ... (%d lines) ... %s", name, trim(lines[0]), len(lines), trim(lines[len(lines)-1]))
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(l, "panic:"):
			return l
		case strings.HasPrefix(l, "--- FAIL:"):
			if len(lines) > 0 {
				return say()
			}
			name = strings.Fields(l)[2]
		case strings.HasPrefix(l, "--- ") || l == "FAIL" || l == "PASS":
			if len(lines) > 0 {
				return say()
			}
		case name != "" && strings.Contains(l, "_test.go:"):
			lines = append(lines, l)
		}
	}
	if name != "" {
		return say()
	}
	return firstLine(out, func(l string) bool { return strings.Contains(l, "FAIL") })
}

func firstLine(out []byte, match func(string) bool) string {
	for _, l := range strings.Split(string(out), "\n") {
		if match(l) {
			return trim(strings.TrimSpace(l))
		}
	}
	return "(no failure line; see go test's output)"
}

func trim(s string) string {
	if len(s) > 160 {
		return s[:160] + "..."
	}
	return s
}

// moduleRoot is the directory of the go.mod above the working directory.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module: run mutate from baton's repository")
	}
	return filepath.Dir(mod), nil
}
