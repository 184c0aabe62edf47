package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/creack/pty"
)

// buildTaskdeck builds the real taskdeck binary from the product module
// (wherever bench's replace directive points) into dir.
func buildTaskdeck(dir string) (string, error) {
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/taskdeck/taskdeck").Output()
	if err != nil {
		return "", fmt.Errorf("finding the taskdeck module: %w", err)
	}
	bin := filepath.Join(dir, "taskdeck")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = strings.TrimSpace(string(root))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build taskdeck: %v\n%s", err, out)
	}
	return bin, nil
}

// frameTimeout bounds one dashboard run; a first frame is expected in
// well under a second, but one of 100,000 open tasks on a loaded machine
// took minutes.
var frameTimeout = flag.Duration("frame-timeout", time.Minute, "how long one dashboard run may take to show its first frame")

// noServersConfig writes, beside the store in dir (not in it), a server config
// that names no server, so that a taskdeck on the store contacts none.
func noServersConfig(dir string) (string, error) {
	config := dir + ".no-servers.json"
	return config, os.WriteFile(config, []byte(`{"mcpServers":{}}`), 0o600)
}

// The pseudo-terminal's size.
const frameCols, frameRows = 120, 40

// firstFrame runs the taskdeck dashboard on the store in dir, in a
// pseudo-terminal, with a server config that names no server (so none is
// contacted), and returns the time from just before exec to the first
// output that contains marker. It then quits the dashboard with q, and
// kills it if it does not exit; either way it is waited for.
func firstFrame(bin, dir, marker string) (time.Duration, error) {
	config, err := noServersConfig(dir)
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(bin, "--data-dir", dir, "--config", config)
	cmd.Env = append(os.Environ(), "TERM=xterm-256color", "TERM_PROGRAM=", "NO_COLOR=")
	t0 := time.Now()
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: frameRows, Cols: frameCols})
	if err != nil {
		return 0, err
	}
	found := make(chan time.Duration, 1)
	drained := make(chan []byte, 1)
	go func() { // reads until the child exits, so that it never blocks writing
		var out []byte
		seen := false
		buf := make([]byte, 64<<10)
		for {
			n, err := tty.Read(buf)
			from := max(len(out)-len(marker), 0) // the marker may straddle two reads
			out = append(out, buf[:n]...)
			if !seen && bytes.Contains(out[from:], []byte(marker)) {
				seen = true
				found <- time.Since(t0)
			}
			if err != nil {
				drained <- out
				return
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var el time.Duration
	select {
	case el = <-found:
		_, _ = tty.Write([]byte("q"))
	case err = <-exited:
		exited <- err
		err = fmt.Errorf("taskdeck exited (%v) before showing %q", err, marker)
	case <-time.After(*frameTimeout):
		err = fmt.Errorf("taskdeck showed no %q within %v", marker, *frameTimeout)
		_ = cmd.Process.Kill()
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second): // q was not heard
		_ = cmd.Process.Kill()
		<-exited
	}
	tty.Close()
	out := <-drained
	if err != nil {
		return 0, fmt.Errorf("%w; its output ended with %q", err, out[max(len(out)-300, 0):])
	}
	return el, nil
}
