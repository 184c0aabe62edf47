package testproc_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/testproc"
	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// gone reports whether pid has ended: no such process, or a zombie
// nobody has reaped yet (init reaps it in its own time).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command, which is in parentheses.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) == 0 || fields[0] == "Z" || fields[0] == "X"
}

// start starts cmd and returns the pid it prints on its first line.
func start(t *testing.T, cmd *exec.Cmd) (chan struct{}, int) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatalf("%v printed no pid", cmd.Args)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { // what a failed check left
		if !gone(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return exited, pid
}

// Stop ends what the child started too: a grandchild that ignores the
// child's end (a stdio server whose pipe is held, a notify command) dies
// with the group. Killing the child alone (what the helpers did) left it.
func TestStopKillsTheGroup(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		cmd := exec.Command("sh", "-c", `sleep 600 </dev/null >/dev/null 2>&1 & echo $!; wait`)
		testproc.Group(cmd)
		exited, grandchild := start(t, cmd)
		testproc.Stop(cmd, sig, waitfor.Scale(5*time.Second), exited)
		waitfor.Within(t, 10*time.Second, fmt.Sprintf("the grandchild %d to die after Stop with %v", grandchild, sig), func() bool { return gone(grandchild) })
	}
}

// A child of a test binary that dies without its cleanup (a timeout's
// panic) is killed by the kernel: here a helper process stands for the
// test binary, starts a child through Group and exits at once.
func TestChildDiesWithTheTestBinary(t *testing.T) {
	if os.Getenv("TESTPROC_HELPER") == "1" {
		cmd := exec.Command("sleep", "600")
		testproc.Group(cmd)
		if err := cmd.Start(); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(cmd.Process.Pid)
		os.Exit(0) // no cleanup, no Wait
	}
	helper := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithTheTestBinary$")
	helper.Env = append(os.Environ(), "TESTPROC_HELPER=1")
	exited, child := start(t, helper)
	<-exited
	waitfor.Within(t, 10*time.Second, fmt.Sprintf("the helper's child %d to die with it", child), func() bool { return gone(child) })
}
