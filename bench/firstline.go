package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// firstLine runs `taskdeck ARGS` (watch --json, ls --json) on the store in
// dir, with a server config that names no server, and returns the time
// from just before exec to its first line on stdout, which must be a task
// (for watch, the first open task it found, printed once the start-up
// reconcile is over). It then interrupts the command and waits for it.
func firstLine(bin, dir string, args ...string) (time.Duration, error) {
	config, err := noServersConfig(dir)
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(bin, append([]string{"--data-dir", dir, "--config", config}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	type line struct {
		at   time.Duration
		text []byte
		err  error
	}
	first, drained := make(chan line, 1), make(chan struct{})
	go func() { // reads until the child exits, so that it never blocks writing
		defer close(drained)
		r := bufio.NewReader(stdout)
		text, err := r.ReadBytes('\n')
		first <- line{time.Since(t0), text, err}
		_, _ = r.WriteTo(io.Discard)
	}()
	var l line
	select {
	case l = <-first:
	case <-time.After(*frameTimeout):
		l.err = fmt.Errorf("no line within %v", *frameTimeout)
	}
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case <-drained:
	case <-time.After(30 * time.Second): // the interrupt was not heard
		_ = cmd.Process.Kill()
		<-drained
	}
	_ = cmd.Wait() // interrupted (exit 130), or over
	var task struct {
		ID string `json:"id"`
	}
	if l.err == nil && (json.Unmarshal(l.text, &task) != nil || task.ID == "") {
		l.err = fmt.Errorf("its first line is not a task: %q", l.text)
	}
	if l.err != nil {
		return 0, fmt.Errorf("taskdeck %s on %s: %w", strings.Join(args, " "), dir, l.err)
	}
	return l.at, nil
}
