package cli

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
)

// TestAgentAdd: `agent add` prints a fresh random token in an env line,
// the "agents" block that names it by ${VAR} (the config accepts it as
// printed), and the agent's server entry with the header; it writes
// nothing (no store, no config change).
func TestAgentAdd(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	const servers = `"mcpServers":{"build":{"url":"http://127.0.0.1:1/mcp"}}`
	c.writeConfig("{" + servers + "}")
	r := c.run("agent", "add", "ci-bot", "--server", "build").Must(t, exitOK)
	m := regexp.MustCompile(`(?m)^export CI_BOT_TOKEN=(\S+)$`).FindStringSubmatch(r.Stdout)
	if m == nil || len(m[1]) < mcpconfig.MinTokenLen {
		t.Fatalf("no env line with a token:\n%s", r.Stdout)
	}
	token := m[1]
	block := regexp.MustCompile(`(?m)^"ci-bot":.*$`).FindString(r.Stdout)
	cfg, err := mcpconfig.ParseConfig("c.json", []byte(`{`+servers+`,"agents":{`+block+`}}`))
	if err != nil {
		t.Fatalf("the printed block does not parse: %v\n%s", err, r.Stdout)
	}
	if a := cfg.Agents["ci-bot"]; a.Token != "${CI_BOT_TOKEN}" || strings.Join(a.Servers, ",") != "build" {
		t.Fatalf("agent block: %+v", a)
	}
	clitest.MustContain(t, r, r.Stdout, `"url":"http://127.0.0.1:8810/mcp/build"`, `"Authorization":"Bearer `+token+`"`)
	if strings.Count(r.Stdout, token) != 2 || strings.Contains(block, token) {
		t.Fatalf("the token is somewhere other than the env line and the agent's header:\n%s", r.Stdout)
	}
	if _, err := os.Stat(c.dataDir); !os.IsNotExist(err) {
		t.Fatalf("agent add made the data dir: %v", err)
	}
	again := c.run("agent", "add", "ci-bot", "--server", "build").Must(t, exitOK)
	if strings.Contains(again.Stdout, token) {
		t.Fatal("two runs printed the same token")
	}
	r = c.run("agent", "add", "ci-bot", "--server", "nope").Must(t, exitUsage)
	clitest.OneErrorLine(t, r, `"nope"`)
	r = c.run("agent", "add", "ci bot").Must(t, exitUsage)
	clitest.OneErrorLine(t, r, "agent name")
}

// TestServeProxyNeedsCredentials: serve --proxy with no agent and no
// operator token would admit nobody (or, before, everybody on loopback):
// refused at start with one line; an agent's unset variable too.
func TestServeProxyNeedsCredentials(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	r := c.run("serve", "--proxy", "127.0.0.1:0").Must(t, exitUsage)
	clitest.OneErrorLine(t, r, "admit nobody", "agent add")
	c.writeConfig(`{"agents":{"a":{"token":"${TASKDECK_TEST_UNSET_TOKEN}"}}}`)
	r = c.run("serve", "--proxy", "127.0.0.1:0").Must(t, exitUsage)
	clitest.OneErrorLine(t, r, "TASKDECK_TEST_UNSET_TOKEN is not set")
}
