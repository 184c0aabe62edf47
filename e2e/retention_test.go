package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// TestRetentionShownByServers: the config's "retention" is shown by
// `taskdeck servers`: with no owner running, as run by nothing now; under
// `taskdeck serve`, as run by it, with its first run's outcome (it runs
// at start); and in --json.
func TestRetentionShownByServers(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}},"retention":{"finished":"720h"}}`, srv.url))
	r := d.run("servers").Must(t, exitOK)
	clitest.MustContain(t, r, r.Stdout, "retention: finished tasks older than 720h0m0s are pruned by `taskdeck serve` or the dashboard, neither of which runs now")

	owner := d.serve()
	defer owner.kill()
	clitest.WaitFor(t, "serve's first retention run", func() bool {
		r = d.run("servers").Must(t, exitOK)
		return strings.Contains(r.Stdout, "the last run, at")
	})
	clitest.MustContain(t, r, r.Stdout, "are pruned every hour by this owner; the last run, at", "pruned 0")
	r = d.run("servers", "--json").Must(t, exitOK)
	clitest.MustContain(t, r, r.Stdout, `"retention":{"finished":"720h0m0s","runner":"this engine","lastRun":`)

	d.writeConfig(`{"retention":{"finished":"30 days"}}`)
	r = d.run("servers").Must(t, exitUsage)
	clitest.OneErrorLine(t, r, "retention.finished", `such as "30d"`, `got "30 days"`)
}
