package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// serverTasks are the sample tasks (on build) and two more servers: web,
// whose one open task waits for input, and a server whose tasks ended.
func serverTasks() []*model.Task {
	tasks := sampleTasks()
	web := *tasks[1]
	web.ID, web.Server = "t90", model.ServerRef{Name: "web"}
	old := *tasks[2]
	old.ID, old.Server = "t91", model.ServerRef{Name: "old"}
	return append(tasks, &web, &old)
}

// TestServersView: S lists every server with its health, open and
// waiting counts, push state, polls behind, last error and the engine
// that watches it; the lines under the table say the selected server in
// full at 80 columns; enter shows its tasks alone and esc comes back.
func TestServersView(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {200, 60}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			tasks := serverTasks()
			m := loaded(t, tasks, size[0], size[1])
			failed := deck.PollState{Errors: 3, LastError: "server build unreachable: connection refused by 127.0.0.1:9", LastPolled: fixedNow, Watcher: "hostb/4242/0a0b0c0d"}
			m.Update(feedMsg{events: []deck.Event{{Kind: deck.EventPoll, Rev: 2, Entries: []deck.Entry{
				{Task: tasks[0], Poll: failed}, {Task: tasks[8], Poll: deck.PollState{Next: fixedNow.Add(-10e9), Watcher: "hosta/17/01020304"}},
				{Task: tasks[9], Poll: deck.PollState{NoEngine: true}}}}}})
			m.configured = []deck.Server{{Name: "build", Push: deck.PushDown, PushError: "the stream ended"}, {Name: "web", Push: deck.PushUp}}
			m.Update(tickMsg(fixedNow))
			m.Update(keyMsg("S"))
			s := plainView(m)
			build := lineWith(s, "  build  ")
			for _, want := range []string{pollFailedSymbol, " 3 ", " 1 ", "down", "connection refused"} {
				if !strings.Contains(build, want) {
					t.Errorf("build's row lacks %q: %q\n%s", want, build, s)
				}
			}
			if web := lineWith(s, "  web  "); !strings.Contains(web, " 1 ") || !strings.Contains(web, "up") || !strings.Contains(web, "no engine polls") {
				t.Errorf("web's row: %q", web)
			}
			if old := lineWith(s, "  old  "); !strings.Contains(old, "·") {
				t.Errorf("a server whose tasks ended: %q", old)
			}
			// The first server (build) is selected: all of it under the table.
			for _, want := range []string{"push: stream down, re-subscribing: the stream ended", "last error: server build unreachable: connection refused by 127.0.0.1:9",
				"watched by: hosta, pid 17; hostb, pid 4242", "1 poll behind"} {
				if !strings.Contains(strings.Join(strings.Fields(s), " "), want) {
					t.Errorf("the servers view lacks %q:\n%s", want, s)
				}
			}
			for i, l := range strings.Split(s, "\n") {
				if w := len([]rune(l)); w > size[0] {
					t.Errorf("line %d is %d cells wide: %q", i, w, l)
				}
			}

			m.Update(keyMsg("j"))
			m.Update(keyMsg("j"))
			m.Update(keyMsg("enter"))
			if ids := visibleIDs(m); len(ids) != 1 || ids[0] != "t90" || m.mode() != modeTable {
				t.Fatalf("enter on web shows %v in mode %v, want web's task alone", ids, m.mode())
			}
			if !strings.Contains(plainView(m), "server: web") {
				t.Errorf("the footer does not say the server shown:\n%s", plainView(m))
			}
			m.Update(keyMsg("esc"))
			if m.mode() != modeServers || m.servers.name != "web" || len(m.list.visible) != len(tasks) {
				t.Fatalf("esc after the drill: mode %v on %q, %d rows", m.mode(), m.servers.name, len(m.list.visible))
			}
			m.Update(keyMsg("esc"))
			if m.mode() != modeTable {
				t.Fatalf("esc in the servers view leaves mode %v", m.mode())
			}
		})
	}
}

// TestAgentColumnMarksAndAges: once a record names an agent the table
// has an AGENT column (at 80 columns too, where the status is its symbol
// alone); a marked row is drawn marked, not only with *; ages under ten
// minutes keep their seconds; a task that starts to wait says which
// agent waits on you, the keys first.
func TestAgentColumnMarksAndAges(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {200, 60}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			tasks := sampleTasks()
			m := loaded(t, tasks, size[0], size[1])
			if s := plainView(m); strings.Contains(s, "AGENT") {
				t.Fatalf("an AGENT column with no agent:\n%s", s)
			}
			held := tasks[1].Clone()
			held.Agent = "ux-agent-held"
			m.Update(feedMsg{events: []deck.Event{{Kind: deck.EventChange, Rev: 2, Entries: []deck.Entry{{Task: held}}}}})
			s := plainView(m)
			row := lineWith(s, " deploy ")
			if !strings.Contains(s, "AGENT") || !strings.Contains(row, "ux-agen") || !strings.Contains(row, "5m00s") {
				t.Fatalf("the deploy row at %d columns: %q\n%s", size[0], row, s)
			}
			narrow := size[0] < 100
			if got := strings.Contains(s, "STATUS"); got == narrow {
				t.Errorf("at %d columns the STATUS title shown = %v", size[0], got)
			}
			if narrow && strings.Contains(row, "input_required") {
				t.Errorf("the narrow status column holds the name: %q", row)
			}

			m.alert(held)
			if line := lineWith(plainView(m), "waits on you"); !strings.Contains(line, "agent ux-agent-held waits on you (deploy): press i then a") {
				t.Errorf("the status line when the task began to wait: %q", line)
			}

			m.Update(keyMsg("j"))
			m.Update(keyMsg("space")) // marks t07; the cursor goes on to the next row
			marked := lineWith(m.View().Content, "t07")
			if !strings.HasPrefix(ansi.Strip(marked), "*") || !strings.Contains(marked, "\x1b[1mt07") {
				t.Errorf("a marked row is not drawn marked: %q", marked)
			}
		})
	}
}

// TestHelpScrollsAndHeaderSummarises: at 80×24 the help is clipped no
// more: its last line says how much is left, ↓ and pgdn scroll to the
// legend's end, another key closes it; where the servers do not fit the
// header line (ten servers at 120 columns, two at 80) it counts them by
// health, names the troubled ones and gives the servers view's key.
func TestHelpScrollsAndHeaderSummarises(t *testing.T) {
	m := loaded(t, sampleTasks(), 80, 24)
	m.Update(keyMsg("?"))
	s := plainView(m)
	if !strings.Contains(s, "more lines (↑/↓, pgup/pgdn scroll)") || strings.Contains(s, "its last polls failed") {
		t.Fatalf("the help at 80x24:\n%s", s)
	}
	m.Update(keyMsg("pgdown"))
	m.Update(keyMsg("down"))
	s = plainView(m)
	if !strings.Contains(s, "its last polls failed") || !strings.Contains(s, "any other key closes") || len(strings.Split(m.View().Content, "\n")) != 24 {
		t.Fatalf("the help scrolled to its end:\n%s", s)
	}
	m.Update(keyMsg("x"))
	if m.mode() != modeTable {
		t.Fatalf("a key other than a scroll leaves mode %v", m.mode())
	}

	var tasks []*model.Task
	var servers []deck.Server
	for i := range 10 {
		name := fmt.Sprintf("server%02d", i)
		servers = append(servers, deck.Server{Name: name})
		for _, tk := range sampleTasks()[:2] {
			tk.ID, tk.Server = fmt.Sprintf("%s-%s", tk.ID, name), model.ServerRef{Name: name}
			tasks = append(tasks, tk)
		}
	}
	m = loaded(t, tasks, 120, 30)
	m.configured = servers
	failed := deck.PollState{Errors: 3, LastError: "connection refused"}
	m.Update(feedMsg{events: []deck.Event{{Kind: deck.EventPoll, Rev: 2, Entries: []deck.Entry{{Task: tasks[18], Poll: failed}, {Task: tasks[19], Poll: failed}}}}})
	line := lineWith(plainView(m), "servers")
	if !strings.Contains(line, "servers ✗1 ✓9 (S) ✗ server09") {
		t.Fatalf("ten servers at 120 columns: %q", line)
	}
	m.Update(keyMsg("S"))
	for _, s := range servers {
		if !strings.Contains(plainView(m), "  "+s.Name+" ") {
			t.Errorf("the servers view lacks %s:\n%s", s.Name, plainView(m))
		}
	}
}

// TestDetailWrapsLongLines: at 80 columns the detail pane wraps a long
// status message instead of cutting it.
func TestDetailWrapsLongLines(t *testing.T) {
	tasks := sampleTasks()
	tasks[0].StatusMessage = "step 3 of 7: linking the release binary for linux/amd64 with every plugin; the end of the line says DONE-MARK"
	m := loaded(t, tasks, 80, 24)
	m.cursor = m.list.IndexOf(tasks[0].ID)
	m.Update(keyMsg("enter"))
	s := plainView(m)
	if !strings.Contains(s, "DONE-MARK") {
		t.Fatalf("the detail pane cuts the long message:\n%s", s)
	}
	for i, l := range strings.Split(s, "\n") {
		if w := len([]rune(l)); w > 80 {
			t.Errorf("line %d is %d cells wide: %q", i, w, l)
		}
	}
}

// TestServersViewRetention: the servers view says the config's retention
// schedule under the table: who prunes, and this engine's last run (when,
// how many) or why it failed; a fleet's other engine by host and pid;
// nothing when the config has no schedule.
func TestServersViewRetention(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {200, 60}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			m := loaded(t, serverTasks(), size[0], size[1])
			m.Update(tickMsg(fixedNow))
			m.Update(keyMsg("S"))
			flat := func() string { return strings.Join(strings.Fields(plainView(m)), " ") }
			if s := flat(); strings.Contains(s, "retention") {
				t.Fatalf("a retention line with no schedule:\n%s", plainView(m))
			}
			for _, c := range []struct {
				r    deck.Retention
				want string
			}{
				{deck.Retention{Finished: "720h0m0s", Runner: "this engine", LastRun: fixedNow.Add(-3 * time.Minute), LastPruned: 12},
					"retention: finished tasks older than 720h0m0s are pruned every hour by this owner; the last run, 3m00s ago, pruned 12"},
				{deck.Retention{Finished: "720h0m0s", Runner: "this engine", LastRun: fixedNow.Add(-time.Hour), LastError: "the store is closed"},
					"retention: finished tasks older than 720h0m0s are pruned every hour by this owner; the last run failed: the store is closed"},
				{deck.Retention{Finished: "168h0m0s", Runner: "hosta/17/01020304"},
					"retention: finished tasks older than 168h0m0s are pruned by the fleet's engine hosta, pid 17"},
			} {
				r := c.r
				m.configured = []deck.Server{{Name: "build", Retention: &r}, {Name: "web", Retention: &r}}
				if s := flat(); !strings.Contains(s, c.want) || strings.Count(s, "retention:") != 1 {
					t.Errorf("the servers view lacks %q once:\n%s", c.want, plainView(m))
				}
				for i, l := range strings.Split(plainView(m), "\n") {
					if w := len([]rune(l)); w > size[0] {
						t.Errorf("line %d is %d cells wide: %q", i, w, l)
					}
				}
			}
		})
	}
}

// TestServersViewFailingDeliveries: an event endpoint whose last delivery
// failed shows under the servers table, at 80 columns too: its kind, its
// target as the config redacts it, since when, and its last error; one
// that delivers does not. The endpoints come from the engine's notify
// status with each listing of the servers.
func TestServersViewFailingDeliveries(t *testing.T) {
	config := `{"mcpServers":{}, "notify":{"webhooks":[{"url":"http://127.0.0.1:9/hook?token=abc","secret":"whsec_` +
		`MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3"}], "commands":[{"argv":["notify-send","taskdeck"]}]}}`
	for _, size := range [][2]int{{80, 24}, {200, 60}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			m := loadedWith(t, serverTasks(), size[0], size[1], config, Options{})
			if len(m.notify) != 2 {
				t.Fatalf("the listing brought %d endpoints from the engine, want its 2: %+v", len(m.notify), m.notify)
			}
			m.Update(keyMsg("S"))
			if s := plainView(m); strings.Contains(s, "notify failing") {
				t.Fatalf("endpoints that never failed shown as failing:\n%s", s)
			}
			hook := m.notify[0]
			if hook.Kind != "webhook" || strings.Contains(hook.Target, "abc") {
				t.Fatalf("the engine's webhook endpoint: %+v", hook)
			}
			hook.Failing, hook.Pending = true, 3
			hook.LastOK, hook.LastErrorAt = fixedNow.Add(-2*time.Hour), fixedNow.Add(-30*time.Second)
			hook.LastError = "POST: 503 Service Unavailable\x1b[31m"
			m.Update(serversMsg{servers: m.configured, notify: []deck.NotifyEndpoint{hook, m.notify[1]}})
			s := plainView(m)
			joined := strings.Join(strings.Fields(s), " ")
			for _, want := range []string{"notify failing: webhook " + hook.Target + " failing since the last delivery 2h ago, 3 pending",
				"last error 30s ago: POST: 503 Service Unavailable"} {
				if !strings.Contains(joined, want) {
					t.Errorf("the servers view lacks %q:\n%s", want, s)
				}
			}
			if strings.Contains(joined, "notify-send") || strings.Contains(s, "[31m") {
				t.Errorf("a delivering command shown, or an escape let through:\n%s", s)
			}
			for i, l := range strings.Split(s, "\n") {
				if w := len([]rune(l)); w > size[0] {
					t.Errorf("line %d is %d cells wide: %q", i, w, l)
				}
			}
		})
	}
}
