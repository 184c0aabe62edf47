package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3/lock"

	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/postgres"
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

// TestSharedStoreShowsWatcher: on a shared database, `get`, `get --json`
// and `ls` on any host name the engine that watches a task (here one
// running in this test process, so its pid), and a task of a server no
// live engine has is shown as out of every engine's reach.
func TestSharedStoreShowsWatcher(t *testing.T) {
	db := pgtest.DB(t)
	url := demoURL(t)
	a := newInproc(t)
	a.writeConfig(fmt.Sprintf(`{"store":%q,"mcpServers":{"demo":{"url":%q}}}`, db, url))
	cfg, err := mcpconfig.ParseConfig("test.json", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, url))
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(engine.Options{Store: db, Claim: true, DataDir: t.TempDir(), Config: cfg, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.PollNow(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	r := a.run("call", "--server", "demo", "sleep", "--args", `{"seconds":600}`).Must(t, exitOK)
	id := clitest.OnlyID(t, r)
	// The call's own process may hold the claim until its lease runs out.
	pid := fmt.Sprintf(", pid %d\n", os.Getpid())
	waitfor.Within(t, 15*time.Second, "get names this process's engine as the watcher", func() bool {
		return strings.Contains(a.run("get", id).Must(t, exitOK).Stdout, pid)
	})
	var got struct {
		Watcher  string `json:"watcher"`
		NoEngine bool   `json:"noEngine"`
	}
	if err := json.Unmarshal([]byte(a.run("get", id, "--json").Must(t, exitOK).Stdout), &got); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.Watcher, fmt.Sprintf("/%d/", os.Getpid())) || got.NoEngine {
		t.Errorf("get --json: watcher %q, noEngine %v; want this process's engine", got.Watcher, got.NoEngine)
	}

	st, err := postgres.Open(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	far := model.NewIntent(model.ServerRef{Name: "elsewhere"}, "sleep", json.RawMessage(`{}`), "", now)
	if err := far.MoveTo(model.StatusWorking, "", now); err != nil {
		t.Fatal(err)
	}
	if err := st.Create(far); err != nil {
		t.Fatal(err)
	}
	detail := a.run("get", far.ID).Must(t, exitOK).Stdout
	if !strings.Contains(detail, "watched by:    no engine can reach its server\n") {
		t.Errorf("get of a task no engine can reach:\n%s", detail)
	}
	if js := a.run("get", far.ID, "--json").Must(t, exitOK).Stdout; !strings.Contains(js, `"noEngine":true`) {
		t.Errorf("get --json of a task no engine can reach: %s", js)
	}
	ls := a.run("ls").Must(t, exitOK).Stdout
	host, _ := os.Hostname()
	lines := strings.Split(ls, "\n")
	if !strings.Contains(lines[0], "WATCHER") {
		t.Fatalf("ls on a shared store has no WATCHER column:\n%s", ls)
	}
	for _, l := range lines[1:] {
		switch {
		case strings.HasPrefix(l, id) && !strings.Contains(l, " "+host+" "):
			t.Errorf("ls does not name the watcher's host %s:\n%s", host, l)
		case strings.HasPrefix(l, far.ID) && !strings.Contains(l, " none "):
			t.Errorf("ls does not say no engine watches the far task:\n%s", l)
		}
	}
}

// sqlExec runs statements on the database db names, on a connection of
// the test's own.
func sqlExec(t *testing.T, db string, stmts ...string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, s := range stmts {
		if _, err := conn.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// TestSharedStoreReadOnlyExits3: a shared database that refuses writes (read-only) fails a call with exit 3
// and one line that says so and that nothing was recorded; reads go on.
func TestSharedStoreReadOnlyExits3(t *testing.T) {
	db := pgtest.DB(t)
	c := newInproc(t)
	c.writeConfig(fmt.Sprintf(`{"store":%q,"mcpServers":{"demo":{"url":%q}}}`, db, demoURL(t)))
	c.run("call", "--server", "demo", "echo", "--args", `{"text":"before"}`).Must(t, exitOK)
	cfg, err := pgx.ParseConfig(db)
	if err != nil {
		t.Fatal(err)
	}
	sqlExec(t, db, fmt.Sprintf(`ALTER DATABASE %q SET default_transaction_read_only = on`, cfg.Database))
	r := c.run("call", "--server", "demo", "echo", "--args", `{"text":"while read-only"}`)
	r.Must(t, exitUnreachable)
	clitest.OneErrorLine(t, r, "refuses writes", "nothing was recorded")
	r = c.run("ls")
	r.Must(t, exitOK)
	if n := strings.Count(r.Stdout, "completed"); n != 1 {
		t.Errorf("ls on the read-only database lists %d completed tasks, want the one made before\n%s", n, r)
	}
}

// TestSharedStoreLostDuringMigrationExits3: the connection that waits for
// the migration lock (another engine migrates) is killed: the command
// exits 3, the database being unreachable, not 6 (the store's own damage).
func TestSharedStoreLostDuringMigrationExits3(t *testing.T) {
	db := pgtest.DB(t)
	migrator, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer migrator.Close(context.Background())
	// goose's lock: the one taskdeck's migrations take (lock.DefaultLockID).
	if _, err := migrator.Exec(context.Background(), `SELECT pg_advisory_lock($1)`, lock.DefaultLockID); err != nil {
		t.Fatal(err)
	}
	c := newInproc(t)
	done := make(chan clitest.Result, 1)
	go func() { done <- c.run("--store", db, "ls") }()
	var killed bool
	waitfor.Within(t, clitest.CmdTimeout, "the command to wait for the migration lock", func() bool {
		err := migrator.QueryRow(context.Background(), `SELECT bool_or(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name LIKE 'taskdeck-%' AND query LIKE '%pg_try_advisory_lock%'`).Scan(&killed)
		return err == nil && killed
	})
	r := <-done
	r.Must(t, exitUnreachable)
	clitest.OneErrorLine(t, r, "PostgreSQL")
}
