package testproc_test

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"testing"

	"github.com/taskdeck/taskdeck/internal/testproc"
)

// TestHelperServer is not a test: run with TESTPROC_SERVE set, it is a
// server on that address for the tests below, in a process of its own.
func TestHelperServer(t *testing.T) {
	addr := os.Getenv("TESTPROC_SERVE")
	if addr == "" {
		t.Skip("the server the ServeOnPorts tests start")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n") // "…: address already in use"
		os.Exit(1)
	}
	_ = http.Serve(l, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	os.Exit(0)
}

func helperServer(addr string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServer$")
	cmd.Env = append(os.Environ(), "TESTPROC_SERVE="+addr)
	return cmd
}

// A server that finds an address it was given taken (by another test's
// connection, between the port's choice and its bind) is started again
// on other ports, and ServeOnPorts returns the addresses it serves on.
func TestServeOnPortsStartsAgainWhenAPortIsTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	attempts := 0
	addrs := testproc.ServeOnPorts(t, 2, "helper server", func(addrs []string) (*exec.Cmd, string) {
		if addrs[0] == addrs[1] {
			t.Errorf("two of the addresses are one: %v", addrs)
		}
		attempts++
		addr := addrs[0]
		if attempts == 1 {
			addr = taken.Addr().String()
		}
		return helperServer(addr), "http://" + addr + "/"
	})
	if attempts != 2 {
		t.Fatalf("the server was started %d times, want 2 (once on the taken port, once on a free one)", attempts)
	}
	resp, err := http.Get("http://" + addrs[0] + "/")
	if err != nil {
		t.Fatalf("the address ServeOnPorts returned is not served: %v", err)
	}
	resp.Body.Close()
}
