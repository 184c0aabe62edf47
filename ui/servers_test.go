package ui

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/mcpclient/wire"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/present"
)

// addServer configures one more server, behind a hostile front (so that
// a test can make its polls fail), and reopens the engine on it; for a
// harness's setup, before the dashboard opens.
func addServer(h *harness, name string) *hostile.Server {
	h.t.Helper()
	hs := hostile.Start(h.t, demo.Options{Speed: 0.05, PollInterval: 20 * time.Millisecond})
	servers := map[string]any{name: map[string]string{"url": hs.URL}}
	for n, s := range h.cfg.Servers {
		servers[n] = map[string]string{"url": s.URL}
	}
	raw, _ := json.Marshal(map[string]any{"mcpServers": servers})
	cfg, err := mcpconfig.ParseConfig("test", raw)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.eng.Close(); err != nil {
		h.t.Fatal(err)
	}
	h.cfg = cfg
	h.open()
	return hs
}

func (h *harness) callOn(ref model.ServerRef, tool, args string) *model.Task {
	h.t.Helper()
	res, err := h.eng.Call(context.Background(), deck.CallRequest{Server: ref, Tool: tool, Args: json.RawMessage(args)})
	if err != nil {
		h.t.Fatal(err)
	}
	return res.Task
}

// TestServersAtAGlance: an ad-hoc URL of a configured server shows by
// its name, another by host:port; the header says each server's health,
// and a server whose polls fail shows as unreachable, with its rows
// flagged and in the problems group, until it answers again; v shows one
// server's tasks alone.
func TestServersAtAGlance(t *testing.T) {
	var flaky *hostile.Server
	var viaURL, onFlaky, adHoc *model.Task
	var adHocHost string
	h := newHarness(t, func(h *harness) {
		flaky = addServer(h, "flaky")
		other := hostile.Start(t, demo.Options{Speed: 0.05, PollInterval: 20 * time.Millisecond})
		u, _ := url.Parse(other.URL)
		adHocHost = u.Host
		// 3,600 demo seconds are 3 minutes at the demo's speed: the tasks
		// stay open through the test on a loaded machine.
		h.call("sleep", `{"seconds":3600}`)
		viaURL = h.callOn(model.ServerRef{URL: h.cfg.Servers["demo"].URL}, "sleep", `{"seconds":3600}`)
		onFlaky = h.callOn(model.ServerRef{Name: "flaky"}, "sleep", `{"seconds":3600}`)
		adHoc = h.callOn(model.ServerRef{URL: other.URL}, "sleep", `{"seconds":3600}`)
	})
	h.send(tea.WindowSizeMsg{Width: 200, Height: 30}) // room for every server in the header
	h.until("every server is healthy", func(m *Model) bool {
		s := h.screen()
		return strings.Contains(s, "✓ demo 2 open") && strings.Contains(s, "✓ flaky 1 open") && strings.Contains(s, "✓ "+adHocHost+" 1 open")
	})
	if got := lineWith(h.screen(), h.m.list.shortID(viaURL.ID)); !strings.Contains(got, " demo ") {
		t.Errorf("a task called by the URL of server demo shows as %q", got)
	}
	if got := lineWith(h.screen(), h.m.list.shortID(adHoc.ID)); !strings.Contains(got, adHocHost) || strings.Contains(got, "http://") {
		t.Errorf("an ad-hoc server shows as %q, want %s", got, adHocHost)
	}

	// The problems view is open when the polls start failing: a failed
	// poll changes no record, yet the task joins the view.
	h.key("4")
	if n := len(h.m.list.visible); n != 0 {
		t.Fatalf("problems shows %d tasks before any failed", n)
	}
	flaky.On("tasks/get", hostile.HTTPStatus(500))
	h.until("flaky is unreachable", func(m *Model) bool { return strings.Contains(h.screen(), "✗ flaky unreachable: ") })
	h.until("its task joins the problems", func(m *Model) bool { return len(m.list.visible) == 1 })
	if ids := visibleIDs(h.m); ids[0] != onFlaky.ID {
		t.Fatalf("problems shows %v, want the flaky server's task %s", ids, onFlaky.ID)
	}
	row := lineWith(h.screen(), h.m.list.shortID(onFlaky.ID))
	if !strings.Contains(row, pollFailedSymbol) || !strings.Contains(row, "poll failed") {
		t.Errorf("the row of a failing server looks healthy: %q", row)
	}
	if s := h.screen(); !strings.Contains(s, "✓ demo 2 open") || !strings.Contains(s, "4 problems 1]") {
		t.Errorf("the header:\n%s", s)
	}

	flaky.On("tasks/get", nil)
	h.until("flaky answers again", func(m *Model) bool { return strings.Contains(h.screen(), "✓ flaky 1 open") })
	h.until("its task leaves the problems", func(m *Model) bool { return len(m.list.visible) == 0 })

	h.key("0")
	for range 3 { // the servers in name order: the ad-hoc host, demo, flaky
		h.key("v")
	}
	if ids := visibleIDs(h.m); len(ids) != 1 || ids[0] != onFlaky.ID || !strings.Contains(h.screen(), "server: flaky") {
		t.Fatalf("v v v shows %v, want flaky's task alone:\n%s", ids, h.screen())
	}
	h.key("v")
	if n := len(h.m.list.visible); n != 4 {
		t.Fatalf("after the last server v shows %d tasks, want all 4", n)
	}
}

// TestServerNames: how servers show, without a server behind them.
func TestServerNames(t *testing.T) {
	configured := []deck.Server{{Name: "web", Target: "http://127.0.0.1:8080/mcp"}, {Name: "local", Target: "taskdeck-demo --stdio", Stdio: true}}
	for _, c := range []struct {
		ref  model.ServerRef
		want string
	}{
		{model.ServerRef{Name: "web"}, "web"},
		{model.ServerRef{URL: "http://127.0.0.1:8080/mcp/"}, "web"},
		{model.ServerRef{URL: "HTTP://127.0.0.1:8080/mcp"}, "web"},
		{model.ServerRef{URL: "http://127.0.0.1:9090/mcp"}, "127.0.0.1:9090"},
		{model.ServerRef{URL: "http://127.0.0.2:9090/api/mcp"}, "127.0.0.2:9090/api/mcp"},
		{model.ServerRef{URL: "http://user:secret@127.0.0.3:1/mcp?token=abc"}, "127.0.0.3:1"},
	} {
		if got := present.ServerName(c.ref, configured); got != c.want {
			t.Errorf("ServerName(%+v) = %q, want %q", c.ref, got, c.want)
		}
	}
	m := &Model{configured: configured}
	if got := m.detailServer(&model.Task{Server: model.ServerRef{URL: "http://user:secret@127.0.0.3:1/mcp?token=abc"}}); strings.Contains(got, "secret") || strings.Contains(got, "abc") {
		t.Errorf("the detail pane shows a secret: %s", got)
	}
}

// TestServersListedAfterTheSnapshot: the configured servers may come
// after the snapshot; naming the rows again keeps one row per task.
func TestServersListedAfterTheSnapshot(t *testing.T) {
	tasks := sampleTasks()
	tasks[0].Server = model.ServerRef{URL: "http://127.0.0.1:8080/mcp"}
	m := loadedWith(t, nil, 120, 30, `{"mcpServers":{"web":{"url":"http://127.0.0.1:8080/mcp"}}}`, Options{})
	m.configured = nil
	m.Update(snapshotOf(tasks))
	m.Update(listServers(context.Background(), m.deck)())
	if len(m.list.visible) != len(tasks) || m.list.Len() != len(tasks) {
		t.Fatalf("%d rows shown, %d held, for %d tasks", len(m.list.visible), m.list.Len(), len(tasks))
	}
	if got := lineWith(plainView(m), " "+tasks[0].Tool+" "); !strings.Contains(got, " web ") {
		t.Fatalf("the ad-hoc URL of web shows as %q", got)
	}
}

// TestServerPickerSaysWhereEachServerIs: n lists each server with its
// URL, or as a stdio child whose tasks die with taskdeck.
func TestServerPickerSaysWhereEachServerIs(t *testing.T) {
	m := loadedWith(t, nil, 120, 30, `{"mcpServers":{"web":{"url":"http://127.0.0.1:8080/mcp?token=abc"},"local":{"command":"taskdeck","args":["demo-server","--stdio"]}}}`, Options{})
	m.Update(keyMsg("n"))
	s := plainView(m)
	if got := lineWith(s, "http://127.0.0.1:8080/mcp"); !strings.Contains(got, "web") || strings.Contains(got, "abc") {
		t.Errorf("the web server's line: %q", got)
	}
	if got := lineWith(s, "stdio: taskdeck demo-server --stdio"); !strings.Contains(got, "local") {
		t.Errorf("the stdio server's line: %q", got)
	}
}

// TestServerHealthCountsFailingAndOverduePolls: some of a server's polls
// failing, and polls overdue, as the header says them.
func TestServerHealthCountsFailingAndOverduePolls(t *testing.T) {
	tasks := sampleTasks() // build: compile, deploy and evil are open
	m := loaded(t, tasks, 200, 30)
	late := deck.PollState{Next: fixedNow.Add(-10 * time.Second)}
	failed := deck.PollState{Errors: 3, LastError: "connection refused", LastPolled: fixedNow.Add(-time.Second), Next: fixedNow.Add(time.Second)}
	m.Update(feedMsg{events: []deck.Event{{Kind: deck.EventPoll, Rev: 2, Entries: []deck.Entry{
		{Task: tasks[0], Poll: late}, {Task: tasks[1], Poll: late}, {Task: tasks[8], Poll: failed}}}}})
	m.Update(tickMsg(fixedNow))
	if got := lineWith(plainView(m), "servers"); !strings.Contains(got, pollFailedSymbol+" build 1/3 polls failing: connection refused · poll · 2 polls behind") {
		t.Fatalf("the servers line: %q", got)
	}
	m.Update(feedMsg{events: []deck.Event{{Kind: deck.EventPoll, Rev: 2, Entries: []deck.Entry{
		{Task: tasks[0], Poll: deck.PollState{Next: fixedNow.Add(time.Second)}}, {Task: tasks[1], Poll: deck.PollState{Next: fixedNow}}, {Task: tasks[8], Poll: deck.PollState{}}}}}})
	m.Update(tickMsg(fixedNow))
	if got := lineWith(plainView(m), "servers"); !strings.Contains(got, "✓ build 3 open") || strings.Contains(got, "behind") {
		t.Fatalf("the servers line once polls caught up: %q", got)
	}
}

// TestServerPushOrPoll: the header says whether a server pushes its
// tasks' changes or is polled.
func TestServerPushOrPoll(t *testing.T) {
	for _, c := range []struct {
		noPush     bool
		want, next string
	}{{false, "✓ demo 1 open · push", "push"}, {true, "✓ demo 1 open · poll", "a countdown"}} {
		h := newHarnessWith(t, demo.Options{NoPush: c.noPush}, func(h *harness) { h.call("sleep", `{"seconds":600}`) })
		h.until(c.want, func(m *Model) bool {
			h.send(tickMsg(time.Now())) // the push count moves on the tick
			return strings.Contains(lineWith(h.screen(), "servers"), c.want)
		})
		// The row says it too: a pushed task's NEXT is "push", a polled
		// one's a countdown (or "now").
		h.until("the row's NEXT says "+c.next, func(m *Model) bool {
			next := m.nextPoll(m.list.visible[0].task)
			if c.noPush {
				return next != "" && next != "push"
			}
			return next == "push"
		})
	}
}

// TestServerPushDown: a push stream that keeps failing shows as down,
// with why, once the servers are listed again.
func TestServerPushDown(t *testing.T) {
	var flaky *hostile.Server
	h := newHarness(t, func(h *harness) {
		flaky = addServer(h, "flaky")
		flaky.On(wire.MethodListen, hostile.HTTPStatus(500))
		h.callOn(model.ServerRef{Name: "flaky"}, "sleep", `{"seconds":600}`)
	})
	h.send(tea.WindowSizeMsg{Width: 200, Height: 30})
	h.until("flaky's push is down", func(m *Model) bool {
		h.send(tickMsg(time.Now()))
		h.run(listServers(context.Background(), h.eng))
		return strings.Contains(lineWith(h.screen(), "servers"), "✓ flaky 1 open · poll · push down, re-subscribing")
	})
	// The header has no room for why at 200 columns; the servers view
	// says it.
	h.key("S")
	h.key("down")
	if s := strings.Join(strings.Fields(h.screen()), " "); !strings.Contains(s, "push: stream down, re-subscribing: ") {
		t.Fatalf("the servers view does not say why flaky's push is down:\n%s", h.screen())
	}
}
