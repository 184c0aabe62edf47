package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// TestExplicitConfigMustExist: --config naming a file that is not there is
// a usage error (a typo would otherwise mean "no servers"); e2e's
// TestDefaultConfigMayBeMissing checks the default path.
func TestExplicitConfigMustExist(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	c.config = filepath.Join(t.TempDir(), "missing.json")
	r := c.run("servers").Must(t, exitUsage)
	clitest.OneErrorLine(t, r, c.config, "does not exist", "--config")
}

// TestConfigWithAnotherClientsKey: a config whose servers sit under
// another client's top-level key is refused with the key to use.
func TestConfigWithAnotherClientsKey(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	c.writeConfig(`{"servers": {"demo": {"url": "http://127.0.0.1:1/mcp"}}}`)
	r := c.run("servers").Must(t, exitUsage)
	clitest.OneErrorLine(t, r, c.config, `"servers"`, `"mcpServers"`)
}

// TestPruneOlderThanDays: --older-than takes days as well as Go durations.
func TestPruneOlderThanDays(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	url := demoURL(t)
	c.run("call", "--url", url, "echo", "--args", `{"text":"x"}`, "--wait").Must(t, exitOK)
	r := c.run("prune", "--older-than", "3d").Must(t, exitOK)
	clitest.MustContain(t, r, r.Stdout, "pruned 0 finished tasks")
	r = c.run("prune", "--older-than", "0d").Must(t, exitOK)
	clitest.MustContain(t, r, r.Stdout, "pruned 1 finished task\n")
	r = c.run("prune", "--older-than", "3 days").Must(t, exitUsage)
	clitest.OneErrorLine(t, r, "--older-than", "3d")
}

// TestStdioCallWithoutWaitWarns: a task on a stdio server dies with the
// process that started the server; a call that returns at once says so.
func TestStdioCallWithoutWaitWarns(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	c.writeConfig(fmt.Sprintf(`{"mcpServers":{"local":{"command":%q,"args":["demo-server","--stdio","--speed","0.05"]}}}`, selfBin))
	r := c.run("call", "--server", "local", "sleep", "--args", `{"seconds":600}`).Must(t, exitOK)
	clitest.OnlyID(t, r)
	clitest.OneErrorLine(t, r, "warning", "stdio server", "dies with this process", "--wait", "HTTP server")

	// A call that has already ended has nothing to lose.
	r = c.run("call", "--server", "local", "echo", "--args", `{"text":"x"}`).Must(t, exitOK)
	if strings.Contains(r.Stderr, "warning") {
		t.Fatalf("a finished call warned\n%s", r)
	}
	// With --wait the process follows the task to its end: no warning.
	r = c.run("call", "--server", "local", "sleep", "--args", `{"seconds":1}`, "--wait").Must(t, exitOK)
	if strings.Contains(r.Stderr, "warning") {
		t.Fatalf("call --wait warned\n%s", r)
	}
}
