package versus

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"time"
)

// proc is one running engine instance.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result, once done is closed
}

// startProc starts one instance; every status line it prints goes to
// onStatus, bad status lines to onBad, its stderr to logPath.
func startProc(name string, c command, args []string, logPath string, onStatus func(StatusLine), onBad func(error)) (*proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(c.path, append(append([]string{}, c.pre...), args...)...)
	cmd.Stderr = logf
	setGroup(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("versus: starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		s := bufio.NewScanner(out)
		s.Buffer(make([]byte, 64<<10), 1<<20)
		for s.Scan() {
			l, ok, err := ParseStatusLine(s.Text())
			switch {
			case err != nil:
				onBad(fmt.Errorf("instance %s: %w", name, err))
			case ok:
				onStatus(l)
			}
		}
	}()
	go func() {
		<-lines
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// term asks the instance to stop gracefully (SIGTERM to its process
// group, so that a launcher script's program gets it too).
func (p *proc) term() { signalGroup(p.cmd, false) }

// kill stops the instance at once (SIGKILL to its process group).
func (p *proc) kill() { signalGroup(p.cmd, true) }

// wait waits up to timeout for the instance to exit.
func (p *proc) wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("versus: instance %s did not exit within %v", p.name, timeout)
	}
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop terminates gracefully, and kills after timeout.
func (p *proc) stop(timeout time.Duration) error {
	if p.exited() {
		return nil
	}
	p.term()
	if err := p.wait(timeout); err != nil {
		p.kill()
		_ = p.wait(10 * time.Second)
		return err
	}
	return nil
}
