package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/pgtest"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/badger"
)

// TestAuditScriptedSession: two principals act through the library (a
// user and an agent, named with deck.WithActor), the engine moves the
// tasks on, the command line acts as the OS user; `taskdeck audit --json`
// lists every act with its actor in order, `audit verify` passes, and the
// actors show in get and ls --json.
func TestAuditScriptedSession(t *testing.T) {
	c := newInproc(t)
	conf := fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}}}`, demoURL(t))
	c.writeConfig(conf)
	cfg, err := mcpconfig.ParseConfig("test.json", []byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(engine.Options{DataDir: c.dataDir, Config: cfg, RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	alice := model.Actor{Name: "alice", Role: model.RoleUser}
	bot := model.Actor{Name: "ci-bot", Role: model.RoleAgent, Label: "claude"}
	as := func(a model.Actor) context.Context { return deck.WithActor(context.Background(), a) }
	call := func(a model.Actor, tool, args string) string {
		t.Helper()
		res, err := e.Call(as(a), deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: tool, Args: json.RawMessage(args)})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return res.Task.ID
	}
	until := func(id, what string, ok func(*model.Task) bool) {
		t.Helper()
		waitfor.Within(t, 30*time.Second, fmt.Sprintf("task %s %s", id, what), func() bool {
			if err := e.PollNow(context.Background(), []string{id}); err != nil {
				return false
			}
			got, err := e.Get(context.Background(), id)
			return err == nil && ok(got.Task)
		})
	}

	approve := call(alice, "approve", `{"action":"deploy"}`)
	until(approve, "waits for input", (*model.Task).WaitsForInput)
	if _, err := e.Answer(as(bot), approve, map[string]json.RawMessage{"approve-1": json.RawMessage(`{"action":"accept","content":{"approve":true,"reason":"ok"}}`)}); err != nil {
		t.Fatal(err)
	}
	sleep := call(bot, "sleep", `{"seconds":600}`)
	if _, err := e.Cancel(as(alice), sleep); err != nil {
		t.Fatal(err)
	}
	echo := call(bot, "echo", `{"text":"hi"}`)
	if err := e.Forget(as(bot), echo); err != nil {
		t.Fatal(err)
	}
	kept := call(alice, "sleep", `{"seconds":600}`)
	until(approve, "completed", func(t *model.Task) bool { return t.Status == model.StatusCompleted })
	until(sleep, "cancelled", func(t *model.Task) bool { return t.Status == model.StatusCancelled })
	rerun, err := e.Call(as(bot), deck.CallRequest{Server: model.ServerRef{Name: "demo"}, Tool: "sleep", Args: json.RawMessage(`{"seconds":600}`), Repeats: sleep})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := e.Prune(as(alice), 0); err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want the approval and the cancelled sleep", n, err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// The command line, in process, acts as the OS user.
	c.run("cancel", kept).Must(t, exitOK)
	me := deck.LocalUser()

	entries := auditJSON(t, c)
	type act struct{ task, act, actor, keys string }
	var got []act
	for i, en := range entries {
		if i > 0 && en.Rev <= entries[i-1].Rev {
			t.Fatalf("entry %d after entry %d: not in revision order", en.Rev, entries[i-1].Rev)
		}
		if en.Actor.Role == model.RoleEngine {
			if en.Actor.Name != "engine" || en.Act != model.ActUpdate {
				t.Errorf("an engine entry: %+v", en)
			}
			continue
		}
		got = append(got, act{en.Task, en.Act, en.Actor.Name, strings.Join(en.Keys, ",")})
	}
	want := []act{
		{approve, "call", "alice", ""},
		{approve, "answer", "ci-bot", "approve-1"},
		{sleep, "call", "ci-bot", ""},
		{sleep, "cancel", "alice", ""},
		{echo, "call", "ci-bot", ""},
		{echo, "forget", "ci-bot", ""},
		{kept, "call", "alice", ""},
		{rerun.Task.ID, "rerun", "ci-bot", ""},
		{approve, "prune", "alice", ""},
		{sleep, "prune", "alice", ""},
		{kept, "cancel", me.Name, ""},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the acts in the audit log:\n got %v\nwant %v", got, want)
	}
	if agent := entries[slices.IndexFunc(entries, func(en model.AuditEntry) bool { return en.Act == model.ActAnswer })].Actor; agent != bot {
		t.Errorf("the answer's actor = %+v, want %+v", agent, bot)
	}

	v := c.run("audit", "verify").Must(t, exitOK)
	if !strings.Contains(v.Stdout, "audit log verified: ") {
		t.Fatalf("audit verify:\n%s", v)
	}
	// --task takes a prefix of a live record, the whole id of a gone one.
	for _, id := range []string{kept[:len(kept)-2], echo} {
		for l := range strings.Lines(c.run("audit", "--json", "--task", id).Must(t, exitOK).Stdout) {
			if !strings.Contains(l, `"task":"`+id) {
				t.Fatalf("audit --task %s printed another task's entry: %s", id, l)
			}
		}
	}
	// The record says who called and who cancelled it.
	g := c.run("get", kept).Must(t, exitOK)
	if !strings.Contains(g.Stdout, "→ calling  by alice") || !strings.Contains(g.Stdout, "last change:") {
		t.Fatalf("get does not say who called:\n%s", g)
	}
	type row struct {
		ID      string             `json:"id"`
		History []model.Transition `json:"history"`
		LastAct *model.Act         `json:"lastAct"`
	}
	rows := map[string]row{}
	for l := range strings.Lines(c.run("ls", "--json").Must(t, exitOK).Stdout) {
		var r row
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		rows[r.ID] = r
	}
	if r := rows[kept]; len(r.History) == 0 || r.History[0].By != alice || r.LastAct == nil || r.LastAct.Actor.IsZero() {
		t.Fatalf("ls --json of %s: history %+v, last act %+v", kept, r.History, r.LastAct)
	}
	if r := rows[rerun.Task.ID]; len(r.History) == 0 || r.History[0].By != bot {
		t.Fatalf("ls --json of the re-run %s: history %+v", rerun.Task.ID, r.History)
	}
}

// TestAuditOnAFleetNamesTheHost: on a shared database every act names
// the host it came from, the engine's too, and the log verifies from
// either host.
func TestAuditOnAFleetNamesTheHost(t *testing.T) {
	db := pgtest.DB(t)
	url := demoURL(t)
	a, b := newInproc(t), newInproc(t)
	for _, c := range []*inproc{a, b} {
		c.writeConfig(fmt.Sprintf(`{"store":%q,"mcpServers":{"demo":{"url":%q}}}`, db, url))
	}
	id := clitest.OnlyID(t, a.run("call", "--server", "demo", "sleep", "--args", `{"seconds":600}`).Must(t, exitOK))
	b.run("cancel", id).Must(t, exitOK)
	host, _ := os.Hostname()
	var acts []string
	for l := range strings.Lines(b.run("audit", "--json", "--task", id).Must(t, exitOK).Stdout) {
		var en model.AuditEntry
		if err := json.Unmarshal([]byte(l), &en); err != nil {
			t.Fatal(err)
		}
		if en.Actor.Host != host {
			t.Fatalf("entry %d names host %q, want %q: %s", en.Rev, en.Actor.Host, host, l)
		}
		acts = append(acts, en.Act+" "+string(en.Actor.Role))
	}
	if !slices.Contains(acts, "call user") || !slices.Contains(acts, "cancel user") || !slices.Contains(acts, "update engine") {
		t.Fatalf("the acts on a fleet: %v", acts)
	}
	a.run("audit", "verify").Must(t, exitOK)
}

// TestAuditReadsTheLogInPages: `taskdeck audit` reads the log a page at a
// time (auditPage); across the pages' edges, and from inside the runs of
// entries one commit wrote, it lists what one read of the whole log
// gives, each entry once, with its hash; --task finds an entry of the
// oldest page.
func TestAuditReadsTheLogInPages(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	ids := loadStore(t, c.dataDir, 2*auditPage+300, func(int, *model.Task) {})
	listed := auditJSON(t, c)
	s, err := badger.Open(c.dataDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	whole, _, err := store.ReadAudit(s, model.AuditFilter{})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != len(whole) || len(whole) < len(ids) {
		t.Fatalf("audit listed %d entries, one read of the log gives %d (for %d records)", len(listed), len(whole), len(ids))
	}
	for i := range whole {
		if listed[i].Rev != whole[i].Rev || listed[i].Hash != whole[i].Hash || listed[i].Task != whole[i].Task {
			t.Fatalf("entry %d: audit listed %d %s %s, the log holds %d %s %s", i, listed[i].Rev, listed[i].Task, listed[i].Hash, whole[i].Rev, whole[i].Task, whole[i].Hash)
		}
	}
	oldest := ids[len(ids)-1]
	if out := c.run("audit", "--task", oldest).Must(t, exitOK).Stdout; !strings.Contains(out, oldest) || strings.Count(out, "\n") != 1 {
		t.Fatalf("audit --task %s:\n%s\nwant its one entry", oldest, out)
	}
}

// auditJSON runs `taskdeck audit --json` and reads its entries.
func auditJSON(t *testing.T, c *inproc) []model.AuditEntry {
	t.Helper()
	var entries []model.AuditEntry
	for l := range strings.Lines(c.run("audit", "--json").Must(t, exitOK).Stdout) {
		var e model.AuditEntry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("audit --json: %v in %q", err, l)
		}
		entries = append(entries, e)
	}
	return entries
}
