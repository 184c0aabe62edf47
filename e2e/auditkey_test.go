package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/pgtest"
)

// TestServeChecksTheFleetsAuditKey (issue 21): `serve` on PostgreSQL
// without $TASKDECK_AUDIT_KEY warns at start, in one line, what that
// means and how to set it, and serves. Once a host has sealed the log,
// a host with another key, or with none, is refused at start (exit 2,
// one line), since its entries would make `audit verify` name them as
// rewritten; a host with the fleet's key serves.
func TestServeChecksTheFleetsAuditKey(t *testing.T) {
	t.Parallel()
	db := pgtest.DB(t)
	srv := startDemo(t, "127.0.0.1:0")
	host := func(key string) *deck {
		d := newDeck(t)
		d.writeConfig(fmt.Sprintf(`{"store":%q,"mcpServers":{"build":{"url":%q}}}`, db, srv.url))
		if key != "" {
			d.env = append(d.env, "TASKDECK_AUDIT_KEY="+key)
		}
		return d
	}
	const serving = "taskdeck: watching its claimed tasks"
	serve := func(d *deck) *proc {
		t.Helper()
		p := d.start("serve")
		clitest.WaitFor(t, "serve to start", func() bool { return strings.Contains(p.Stderr.String(), serving) || p.exited() })
		if p.exited() {
			t.Fatalf("serve exited %d: %s", p.Code, p.Stderr)
		}
		return p
	}

	p := serve(host(""))
	var warnings []string
	for line := range strings.Lines(p.Stderr.String()) {
		if strings.Contains(line, "warning") {
			warnings = append(warnings, line)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "no $TASKDECK_AUDIT_KEY: this fleet's audit log is not sealed") || !strings.Contains(warnings[0], "openssl rand -hex 32") {
		t.Fatalf("serve without a key warned %q, want one line saying so and how to make one", warnings)
	}
	p.kill()

	keyA, keyB := strings.Repeat("5e", 32), strings.Repeat("a7", 32)
	a := host(keyA)
	a.run("call", "--server", "build", "echo", "--args", `{"text":"sealed"}`).Must(t, exitOK)
	for _, c := range []struct{ name, key, want string }{
		{"another key", keyB, "the audit key is not the one that sealed the audit log's last entry"},
		{"no key", "", "the audit log is sealed (its last entry, "},
	} {
		r := host(c.key).run("serve").Must(t, exitUsage)
		if !strings.Contains(r.Stderr, c.want) || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 {
			t.Errorf("%s: serve said %q, want one line with %q", c.name, r.Stderr, c.want)
		}
	}
	if p := serve(host(keyA)); strings.Contains(p.Stderr.String(), "warning") {
		t.Errorf("serve with the fleet's key warned: %s", p.Stderr)
	}
	a.run("audit", "verify").Must(t, exitOK)
}
