package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/pgtest"
)

// withPassword puts a password into a connection string: the test
// server trusts loopback, so it is ignored there, and must show nowhere.
func withPassword(t *testing.T, conn, pw string) string {
	t.Helper()
	out := strings.Replace(conn, "postgres://postgres@", "postgres://postgres:"+pw+"@", 1)
	if out == conn {
		t.Fatalf("no user in %s", conn)
	}
	return out
}

// TestSharedStoreTwoHosts: two users with data dirs of their own and the
// config's "store" naming one database see each other's calls; neither
// serves a socket in its data dir, and the password shows nowhere.
func TestSharedStoreTwoHosts(t *testing.T) {
	const pw = "hunter2-secret"
	db := withPassword(t, pgtest.DB(t), pw)
	url := demoURL(t)
	a, b := newInproc(t), newInproc(t)
	for _, c := range []*inproc{a, b} {
		c.writeConfig(fmt.Sprintf(`{"store":%q,"mcpServers":{"demo":{"url":%q}}}`, db, url))
	}
	r := a.run("call", "--server", "demo", "sleep", "--args", `{"seconds":600}`).Must(t, exitOK)
	id := clitest.OnlyID(t, r)
	ls := b.run("ls").Must(t, exitOK)
	if !strings.Contains(ls.Stdout, id[:8]) {
		t.Fatalf("the other host's ls does not list task %s\n%s", id, ls)
	}
	got := b.run("get", id).Must(t, exitOK)
	for _, res := range []clitest.Result{r, ls, got} {
		if strings.Contains(res.Stdout+res.Stderr, pw) {
			t.Fatalf("the password reached the output\n%s", res)
		}
	}
	for _, c := range []*inproc{a, b} {
		if _, err := os.Stat(filepath.Join(c.dataDir, "taskdeck.sock")); err == nil {
			t.Errorf("a socket was left in %s: on a shared database no process owns the data dir", c.dataDir)
		}
		logs, _ := filepath.Glob(filepath.Join(c.dataDir, "*.log"))
		for _, l := range logs {
			if data, _ := os.ReadFile(l); strings.Contains(string(data), pw) {
				t.Errorf("the password reached the log %s", l)
			}
		}
	}
}

// TestStoreFlagBadDatabase: --store naming a database that cannot be
// reached fails in one line that names the store without its password.
func TestStoreFlagBadDatabase(t *testing.T) {
	const pw = "hunter2-secret"
	c := newInproc(t)
	r := c.run("--store", "postgres://u:"+pw+"@127.0.0.1:1/db?sslmode=disable", "ls")
	if r.Code == exitOK {
		t.Fatalf("ls on an unreachable database succeeded\n%s", r)
	}
	clitest.OneErrorLine(t, r, "PostgreSQL")
	if strings.Contains(r.Stdout+r.Stderr, pw) {
		t.Fatalf("the password reached the output\n%s", r)
	}
	r = c.run("--store", "mysql://x/y", "ls")
	clitest.OneErrorLine(t, r, "postgres://", "--store")
}
