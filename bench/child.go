package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/store/badger"
)

// The bench binary doubles as its own child processes: the demo server
// (so that the client's CPU, memory and goroutines are measured alone) and
// the start-up probe (a fresh process per measurement).
const childEnv = "TASKDECK_BENCH_CHILD"

func runChild() bool {
	switch os.Getenv(childEnv) {
	case "server":
		childServer()
	case "startup":
		childStartup()
	case "owner":
		childOwner()
	default:
		return false
	}
	return true
}

// childServer serves the demo server on a loopback port, prints its URL,
// and exits when its stdin closes (the parent ended or closed it).
func childServer() {
	poll, _ := time.ParseDuration(os.Getenv("TASKDECK_BENCH_POLL"))
	// No push: the poll benchmark measures polling.
	srv := demo.New(demo.Options{PollInterval: poll, TTL: 2 * time.Hour, NoPush: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error", err)
		return
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	hs.Close()
	srv.Close()
}

// childStartup opens a store and lists its open tasks (or scans every
// record, with mode "scan"), then prints how long each step took.
func childStartup() {
	dir, mode := os.Getenv("TASKDECK_BENCH_DIR"), os.Getenv("TASKDECK_BENCH_MODE")
	if p := os.Getenv("TASKDECK_BENCH_CPUPROFILE"); p != "" {
		if f, err := os.Create(p); err == nil {
			_ = pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	t0 := time.Now()
	s, err := badger.Open(dir, nil)
	if err != nil {
		fmt.Println("error", err)
		return
	}
	t1 := time.Now()
	var n int
	if mode == "scan" {
		all, err := s.All()
		if err != nil {
			fmt.Println("error", err)
			return
		}
		for _, t := range all {
			if !t.Status.Terminal() {
				n++
			}
		}
	} else {
		open, err := s.OpenTasks()
		if err != nil {
			fmt.Println("error", err)
			return
		}
		n = len(open)
	}
	t2 := time.Now()
	// The parent stops its clock at this line; closing is not start-up.
	fmt.Printf("ready %d %d %d\n", n, t1.Sub(t0).Nanoseconds(), t2.Sub(t1).Nanoseconds())
	_ = s.Close()
}

// child is a running child process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func startChild(env ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &child{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}, nil
}

// line reads the child's next line of output, waiting at most d.
func (c *child) line(d time.Duration) (string, error) {
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := c.out.ReadString('\n')
		ch <- res{strings.TrimSpace(s), err}
	}()
	select {
	case r := <-ch:
		if strings.HasPrefix(r.s, "error") {
			return "", errors.New(r.s)
		}
		return r.s, r.err
	case <-time.After(d):
		return "", fmt.Errorf("child printed nothing in %v", d)
	}
}

// stop ends the child: closing stdin asks it to exit; after a grace
// period it is killed. Either way it is waited for.
func (c *child) stop() {
	_ = c.stdin.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// startServer runs the demo server as a child and returns its URL.
func startServer(poll time.Duration) (*child, string, error) {
	c, err := startChild(childEnv+"=server", "TASKDECK_BENCH_POLL="+poll.String())
	if err != nil {
		return nil, "", err
	}
	url, err := c.line(30 * time.Second)
	if err != nil {
		c.stop()
		return nil, "", err
	}
	return c, url, nil
}

// startupOnce measures one start-up in a fresh process: from just before
// exec to the line that says the list is ready.
func startupOnce(dir, mode string) (total, open, list time.Duration, n int, err error) {
	t0 := time.Now()
	c, err := startChild(childEnv+"=startup", "TASKDECK_BENCH_DIR="+dir, "TASKDECK_BENCH_MODE="+mode)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer c.stop()
	line, err := c.line(5 * time.Minute)
	total = time.Since(t0)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "ready" {
		return 0, 0, 0, 0, fmt.Errorf("start-up probe said %q", line)
	}
	n, _ = strconv.Atoi(f[1])
	o, _ := strconv.ParseInt(f[2], 10, 64)
	l, _ := strconv.ParseInt(f[3], 10, 64)
	// Wait for the child to close the store before the next run opens it.
	_ = c.stdin.Close()
	_ = c.cmd.Wait()
	return total, time.Duration(o), time.Duration(l), n, nil
}
