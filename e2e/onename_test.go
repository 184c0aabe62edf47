package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// TestAdHocURLOfAConfiguredServerHasOneName: a `call --url` task whose
// URL is a configured server's shows by that server's name in `ls`, as on
// the dashboard, and `get` gives the name and the URL called.
func TestAdHocURLOfAConfiguredServerHasOneName(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"builds":{"url":%q}}}`, srv.url))
	id := clitest.OnlyID(t, d.run("call", "--url", srv.url, "echo", "--args", `{"text":"ad hoc"}`).Must(t, exitOK))
	r := d.run("ls").Must(t, exitOK)
	if lines := strings.Split(strings.TrimSpace(r.Stdout), "\n"); len(lines) != 2 || !strings.Contains(lines[1], " builds ") || strings.Contains(lines[1], "127.0.0.1") {
		t.Fatalf("ls: want the task under builds\n%s", r)
	}
	r = d.run("get", id).Must(t, exitOK)
	clitest.MustContain(t, r, r.Stdout, "server:        builds  ("+srv.url+")")
}
