package cli

// In-process tests of the command layer: the same Factory that Main
// runs, on real demo servers over loopback HTTP and real stores in
// t.TempDir(), with stdin, stdout and stderr held by the test.

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/model"
)

// TestMain lets the test binary serve as the taskdeck binary: a test
// that configures a stdio server runs `selfBin demo-server --stdio`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "demo-server" {
		os.Exit(Main(os.Args[1:]))
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "finding the test binary:", err)
		os.Exit(1)
	}
	selfBin = exe
	os.Exit(pgtest.Run(m)) // a PostgreSQL only for the tests that ask for one
}

// selfBin is this test binary, which TestMain turns into taskdeck.
var selfBin string

// inproc is one user's taskdeck run in this process.
type inproc struct {
	t       *testing.T
	dataDir string
	config  string
	// prompt, when set, is what the operator types on a terminal.
	prompt string
	// timeout bounds one request to a server (0: the default 30 s).
	timeout time.Duration
	// policy paces polls (zero: the default).
	policy model.PollPolicy
}

func newInproc(t *testing.T) *inproc {
	t.Helper()
	dir := t.TempDir()
	c := &inproc{t: t, dataDir: filepath.Join(dir, "data"), config: filepath.Join(dir, "config.json")}
	c.writeConfig("{}\n") // --config names a file, so it must exist
	return c
}

func (c *inproc) writeConfig(content string) {
	c.t.Helper()
	if err := os.WriteFile(c.config, []byte(content), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// factory is a Factory as Main builds it, on buffers the test reads.
func (c *inproc) factory(stdout, stderr *clitest.SyncBuf) *Factory {
	f := NewFactory(strings.NewReader(c.prompt), stdout, stderr)
	f.canPrompt = c.prompt != ""
	f.policy = c.policy
	return f
}

// run runs one command line to its end with the deck's flags.
func (c *inproc) run(args ...string) clitest.Result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clitest.CmdTimeout)
	defer cancel()
	return c.runCtx(ctx, args...)
}

func (c *inproc) runCtx(ctx context.Context, args ...string) clitest.Result {
	c.t.Helper()
	var stdout, stderr clitest.SyncBuf
	flags := []string{"--data-dir", c.dataDir, "--config", c.config}
	if c.timeout > 0 {
		flags = append(flags, "--request-timeout", c.timeout.String())
	}
	args = append(flags, args...)
	code := c.factory(&stdout, &stderr).Execute(ctx, args)
	if ctx.Err() == context.DeadlineExceeded {
		c.t.Fatalf("taskdeck %s did not finish within %s", strings.Join(args, " "), clitest.CmdTimeout)
	}
	return clitest.Result{Args: args, Stdout: stdout.String(), Stderr: stderr.String(), Code: code}
}

// demoURL serves a demo server over loopback HTTP until the test ends.
func demoURL(t *testing.T) string {
	t.Helper()
	srv := demo.New(demo.Options{Speed: 0.05})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
	})
	return hs.URL + "/mcp"
}

// silentURL is a loopback server that accepts connections and never
// answers a byte.
func silentURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		var conns []net.Conn // held open, unanswered, until the listener closes
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return fmt.Sprintf("http://%s/mcp", ln.Addr())
}
