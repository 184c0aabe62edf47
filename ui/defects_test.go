package ui

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// press hands one key to Update and returns the command it gave back.
func press(m *Model, k string) tea.Cmd {
	_, cmd := m.Update(keyMsg(k))
	return cmd
}

func screenOf(m *Model) string { return ansi.Strip(m.View().Content) }

// waitingHarness is a demo dashboard with one approve task waiting for
// input, selected.
func waitingHarness(t *testing.T) (*harness, *model.Task) {
	var approve *model.Task
	h := newHarness(t, func(h *harness) { approve = h.call("approve", `{"action":"deploy"}`) })
	h.until("approve asks", func(m *Model) bool { return m.list.waiting == 1 })
	h.selectTask(approve.ID)
	return h, approve
}

// Item 7: esc and ctrl+c leave an input form and send nothing.
func TestEscAndCtrlCInAFormSendNothing(t *testing.T) {
	h, approve := waitingHarness(t)
	for _, k := range []tea.KeyPressMsg{keyMsg("esc"), {Code: 'c', Mod: tea.ModCtrl}} {
		h.key("a")
		if h.m.mode() != modeForm {
			t.Fatalf("a opened no form:\n%s", h.screen())
		}
		_, cmd := h.m.Update(k)
		if cmd != nil {
			t.Fatalf("%s in a form returned a command (something is sent)", k)
		}
		if h.m.mode() != modeTable {
			t.Fatalf("%s did not go back to the table:\n%s", k, h.screen())
		}
		if task, _ := h.m.list.Get(approve.ID); len(task.PendingInputs()) != 1 {
			t.Fatalf("after %s the input is no longer pending", k)
		}
	}
	if n := h.demo.Stats().Updates; n != 0 {
		t.Fatalf("the server got %d tasks/update", n)
	}
}

// Item 7: declining is an explicit choice, confirmed, defaulting to No.
func TestDeclineIsAConfirmedChoice(t *testing.T) {
	h, approve := waitingHarness(t)
	h.key("a")
	ctrlX := tea.KeyPressMsg{Code: 'x', Mod: tea.ModCtrl}
	h.send(ctrlX)
	if h.m.mode() != modeConfirm || !strings.Contains(h.screen(), "Decline") {
		t.Fatalf("ctrl+x offered no decline:\n%s", h.screen())
	}
	if cmd := press(h.m, "enter"); cmd != nil || h.m.mode() != modeForm {
		t.Fatalf("enter on the default choice sent something or left the form (mode %d)", h.m.mode())
	}
	h.send(ctrlX)
	h.key("right") // Decline
	h.key("enter")
	h.until("the declined task ends", func(m *Model) bool { return h.status(approve.ID) == model.StatusCompleted })
	if !strings.HasPrefix(h.m.flash, "declined") {
		t.Fatalf("status line %q after a decline", h.m.flash)
	}
	if n := h.demo.Stats().Updates; n != 1 {
		t.Fatalf("the server got %d tasks/update, want 1", n)
	}
}

// Item 7: esc in the form a server asks before a new call starts sends
// nothing: the call is not sent again with a decline, and its record
// keeps the question for later (a, or taskdeck answer).
func TestEscBeforeANewCallStartsSendsNoCall(t *testing.T) {
	h := newHarness(t, nil)
	h.key("n", "enter")
	h.until("tools listed", func(m *Model) bool {
		return m.mode() == modePick && strings.Contains(m.toolPick.title, "choose a tool")
	})
	for h.m.toolPick.items[h.m.toolPick.cursor] != "confirm_first" {
		h.key("down")
	}
	h.key("enter")
	h.until("the argument form", func(m *Model) bool { return m.mode() == modeForm && strings.Contains(h.screen(), "takes no arguments") })
	h.key("enter")
	h.until("the server's question", func(m *Model) bool { return m.mode() == modeForm && strings.Contains(h.screen(), "Run confirm_first?") })
	calls := h.demo.Stats().ToolCalls["confirm_first"]
	if cmd := press(h.m, "esc"); cmd != nil {
		t.Fatal("esc before the call starts returned a command (the call is sent)")
	}
	if h.m.mode() != modeTable || h.demo.Stats().ToolCalls["confirm_first"] != calls {
		t.Fatalf("esc sent the call (mode %d)", h.m.mode())
	}
	h.until("the call's row waits for input", func(m *Model) bool { return m.list.Len() == 1 && m.list.waiting == 1 })
	h.key("i", "a")
	if h.m.mode() != modeForm || !strings.Contains(h.screen(), "Run confirm_first?") {
		t.Fatalf("a does not ask the call's question again:\n%s", h.screen())
	}
}

// Item 8: marks hidden by the filter are not acted on; the question lists
// its targets; enter means No.
func TestConfirmActsOnVisibleRowsListsThemAndDefaultsToNo(t *testing.T) {
	tasks := sampleTasks()
	m := loaded(t, tasks, 120, 30)
	compile := tasks[0]
	m.cursor = m.list.IndexOf(tasks[1].ID)
	press(m, "space") // deploy, waiting for input
	for _, k := range []string{"/", "l", "i", "n", "k", "enter"} {
		press(m, k)
	}
	if len(m.list.visible) != 1 || m.selectedID() != compile.ID {
		t.Fatalf("filter shows %d rows", len(m.list.visible))
	}
	press(m, "c")
	s := screenOf(m)
	if !strings.Contains(s, "Cancel 1 task on the server?") || !strings.Contains(s, compile.ID) || strings.Contains(s, tasks[1].ID) {
		t.Fatalf("the question must name the visible compile task alone:\n%s", s)
	}
	if !strings.Contains(s, "STATUS") {
		t.Fatalf("the question hides the table:\n%s", s)
	}
	if cmd := press(m, "enter"); cmd != nil || m.mode() != modeTable {
		t.Fatal("enter on a fresh question said yes")
	}
	if !strings.Contains(m.flash, "nothing done") {
		t.Fatalf("after No the status line says %q, want \"nothing done\"", m.flash)
	}
}

// Item 9: listing the tools of a server that never answers gives up, and
// esc abandons it at once.
func TestListingToolsOfASilentServerEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() { // accepts, reads, never answers
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	cfg := fmt.Sprintf(`{"mcpServers":{"hole":{"url":"http://%s/mcp"}}}`, ln.Addr())
	m := loadedWith(t, nil, 120, 30, cfg, Options{ListTimeout: 300 * time.Millisecond})
	h := &harness{t: t, m: m, msgs: make(chan tea.Msg, 16)}
	h.key("n", "enter")
	if !strings.Contains(m.flash, "listing tools of hole") {
		t.Fatalf("status line %q", m.flash)
	}
	// While the listing runs, its line stays: it does not expire as a message does.
	m.Update(tickMsg(m.now.Add(flashFor + time.Second)))
	if !strings.Contains(m.flash, "listing tools of hole") {
		t.Fatalf("the listing's line expired while it runs: %q", m.flash)
	}
	h.key("esc")
	if strings.Contains(m.flash, "listing tools") {
		t.Fatalf("esc did not abandon the listing: %q", m.flash)
	}
	h.key("n", "enter")
	h.until("the listing gives up", func(m *Model) bool { return m.flashErr && strings.Contains(m.flash, "hole") })
	if m.mode() != modeTable {
		t.Fatalf("mode %d after the timeout", m.mode())
	}
}

// Item 10: removing a row above the selection keeps the selected task.
func TestForgettingARowAboveKeepsTheSelection(t *testing.T) {
	tasks := sampleTasks()
	m := loaded(t, tasks, 120, 30)
	m.cursor = 3
	m.clampCursor()
	picked := m.selectedID()
	m.Update(feedMsg{events: []deck.Event{{Kind: deck.EventChange, Rev: 2, Deleted: []string{m.list.visible[0].task.ID}}}})
	if got := m.selectedID(); got != picked {
		t.Fatalf("selection moved from %s to %s", picked, got)
	}
}

// Item 11: help at 80×24 shows every key, destructive ones and quit too.
func TestHelpAt80x24ShowsEveryKey(t *testing.T) {
	m := loaded(t, sampleTasks(), 80, 24)
	press(m, "?")
	s := screenOf(m)
	for _, group := range m.keys.FullHelp() {
		for _, b := range group {
			if !strings.Contains(s, b.Help().Key+" ") || !strings.Contains(s, b.Help().Desc) {
				t.Errorf("help at 80x24 lacks %q %q", b.Help().Key, b.Help().Desc)
			}
		}
	}
	if t.Failed() {
		t.Log(s)
	}
}

// Item 11: esc clears a kept filter, as the empty table says.
func TestEscClearsAKeptFilter(t *testing.T) {
	tasks := sampleTasks()
	m := loaded(t, tasks, 120, 30)
	for _, k := range []string{"/", "z", "z", "z", "enter"} {
		press(m, k)
	}
	press(m, "s")
	if !strings.Contains(screenOf(m), "esc clears it") {
		t.Fatalf("no empty-state hint:\n%s", screenOf(m))
	}
	press(m, "esc")
	if len(m.list.visible) != len(tasks) || m.statusFilter != "" || m.filter.Value() != "" {
		t.Fatalf("esc left %d of %d rows visible", len(m.list.visible), len(tasks))
	}
}

// Item 11: an empty filter prompt shows no placeholder letter, and the
// footer says what enter and esc do.
func TestEmptyFilterPrompt(t *testing.T) {
	m := loaded(t, sampleTasks(), 120, 30)
	press(m, "/")
	lines := strings.Split(screenOf(m), "\n")
	status, keys := lines[len(lines)-2], lines[len(lines)-1]
	if strings.Contains(status, "/f") || !strings.Contains(keys, "enter keep") || !strings.Contains(keys, "esc clear") {
		t.Fatalf("filter prompt footer:\n%s\n%s", status, keys)
	}
}

// Item 11: status-line messages expire, and none outlives what it said.
func TestStatusLineMessagesExpire(t *testing.T) {
	m := loaded(t, sampleTasks(), 120, 30)
	m.say("sorted by status")
	m.Update(tickMsg(fixedNow.Add(flashFor + time.Second)))
	if m.flash != "" {
		t.Fatalf("status line still says %q", m.flash)
	}
	m.listing = &listing{server: "demo", gen: 1, cancel: func() {}}
	m.say("listing tools of demo…")
	m.Update(toolsMsg{server: "demo", gen: 1, tools: nil})
	if strings.Contains(m.flash, "listing tools") {
		t.Fatalf("status line still says %q after the tools came", m.flash)
	}
}

// Item 11: a long tool description stays inside the picker's box.
func TestPickerKeepsLongDescriptionsInTheBox(t *testing.T) {
	m := loaded(t, nil, 160, 30)
	m.listing = &listing{server: "demo", gen: 1, cancel: func() {}}
	m.Update(toolsMsg{server: "demo", gen: 1, tools: toolsNamed("confirm_first", strings.Repeat("Asks for confirmation first. ", 8), "sleep", "Sleeps")})
	if m.mode() != modePick {
		t.Fatal("no picker")
	}
	s := screenOf(m)
	items := false
	for _, l := range strings.Split(s, "\n") {
		switch {
		case strings.Contains(l, "choose a tool"):
			items = true
		case strings.Contains(l, "enter choose"):
			items = false
		case items && strings.TrimSpace(strings.Trim(l, "│")) != "":
			if !strings.HasPrefix(l, "│   ") && !strings.HasPrefix(l, "│ > ") {
				t.Fatalf("a description wrapped to the box's edge: %q\n%s", l, s)
			}
		}
	}
	// Names stand in a column: both descriptions start at the same cell.
	a, b := lineWith(s, "Asks for"), lineWith(s, "Sleeps")
	if strings.Index(a, "Asks for") != strings.Index(b, "Sleeps") {
		t.Fatalf("descriptions not aligned:\n%s\n%s", a, b)
	}
}

func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// Item 11: the detail pane's key hint stays on screen when its content is long.
func TestDetailHintStaysOnScreen(t *testing.T) {
	tasks := sampleTasks()
	long := tasks[2]
	long.StatusMessage = strings.Repeat("line\n", 60)
	m := loaded(t, tasks, 80, 24)
	m.cursor = m.list.IndexOf(long.ID)
	press(m, "enter")
	lines := strings.Split(screenOf(m), "\n")
	if hint := lines[len(lines)-1]; !strings.Contains(hint, "back") || !strings.Contains(hint, "copy result") {
		t.Fatalf("the detail pane's keys are not on screen: %q\n%s", hint, strings.Join(lines, "\n"))
	}
}

// Item 12: failed and tool-error rows show the error; a row whose polls
// fail does not look healthy.
func TestRowsShowErrorsAndFailingPolls(t *testing.T) {
	tasks := sampleTasks()
	failed, toolErr, compile := tasks[4], tasks[3], tasks[0]
	failed.StatusMessage, failed.Error = "about to fail", &model.RPCError{Code: -32603, Message: "simulated failure"}
	toolErr.StatusMessage = "about to fail"
	toolErr.Result = json.RawMessage(`{"content":[{"type":"text","text":"simulated tool failure"}],"isError":true}`)
	m := loaded(t, tasks, 160, 30)
	m.polls[compile.ID] = deck.PollState{Errors: 2, LastError: "server build unreachable: connection refused"}
	s := screenOf(m)
	if l := lineWith(s, "package"); !strings.Contains(l, "simulated failure") {
		t.Errorf("failed row: %q", l)
	}
	if l := lineWith(s, "lint"); !strings.Contains(l, "simulated tool failure") {
		t.Errorf("tool-error row: %q", l)
	}
	if l := lineWith(s, "compile"); strings.Contains(l, "● working") || !strings.Contains(l, "⚠") {
		t.Errorf("a row whose polls fail reads as healthy: %q", l)
	}
	// The detail pane has the engine's poll state too.
	m.cursor = m.list.IndexOf(compile.ID)
	press(m, "enter")
	if s := screenOf(m); !strings.Contains(s, "last error (2 in a row): server build unreachable") {
		t.Errorf("the detail pane lacks the poll's last error:\n%s", s)
	}
}

// Item 13: quitting with open tasks on a stdio server asks first, saying
// how many will die.
func TestQuitWithOpenStdioTasksAsks(t *testing.T) {
	tasks := sampleTasks()
	for _, t := range tasks[:2] { // compile (working), deploy (waiting)
		t.Server = model.ServerRef{Name: "local"}
	}
	cfg := `{"mcpServers":{"local":{"command":"taskdeck","args":["demo-server","--stdio"]},"build":{"url":"http://127.0.0.1:1/mcp"}}}`
	m := loadedWith(t, tasks, 120, 30, cfg, Options{})
	if cmd := press(m, "q"); cmd != nil {
		t.Fatal("q quit at once with stdio tasks open")
	}
	if s := screenOf(m); !strings.Contains(s, "2 open tasks on stdio servers") {
		t.Fatalf("quit question:\n%s", s)
	}
	if cmd := press(m, "enter"); cmd != nil {
		t.Fatal("enter quit: the default must be No")
	}
	press(m, "q")
	cmd := press(m, "y")
	if cmd == nil {
		t.Fatal("y did not quit")
	}
	if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Fatal("y did not quit")
	}
	// Without stdio tasks open, q quits at once.
	m = loaded(t, sampleTasks(), 120, 30)
	if cmd := press(m, "q"); cmd == nil {
		t.Fatal("q did not quit")
	}
}

// Item 18: a schema with more fields than a form shows is not built; the
// operator is told how to answer it instead.
func TestHugeInputSchemaIsNotBuilt(t *testing.T) {
	tasks := sampleTasks()
	props := map[string]any{}
	for i := range 10_000 {
		props[fmt.Sprintf("f%05d", i)] = map[string]any{"type": "string"}
	}
	params, _ := json.Marshal(map[string]any{"message": "many", "requestedSchema": map[string]any{"type": "object", "properties": props}})
	ask := tasks[1]
	ask.InputRequests = map[string]model.InputRequest{"big": {Method: "elicitation/create", Params: params}}
	m := loaded(t, tasks, 120, 30)
	m.cursor = m.list.IndexOf(ask.ID)
	press(m, "a")
	if m.mode() == modeForm {
		t.Fatal("a form of 10,000 fields was built")
	}
	if want := "taskdeck answer " + ask.ID + " big"; !strings.Contains(m.flash, want) {
		t.Fatalf("status line %q lacks %q", m.flash, want)
	}
}

func toolsNamed(nameDesc ...string) []deck.Tool {
	var out []deck.Tool
	for i := 0; i < len(nameDesc); i += 2 {
		out = append(out, deck.Tool{Name: nameDesc[i], Description: nameDesc[i+1]})
	}
	return out
}

// A call's server that asks again for an input it was given did not take
// the answer: the status line says so, and the question is asked again.
func TestAnInputAskedAgainIsSaidAndAskedAgain(t *testing.T) {
	tasks := sampleTasks()
	ask := tasks[1].Clone() // deploy waits for input "ok"
	ask.TaskID = ""         // before its task exists
	m := loaded(t, tasks, 120, 30)
	m.Update(taskUpdatedMsg{act: actAnswered, task: ask, needsInput: true, again: []string{"ok"}})
	if !m.flashErr || !strings.Contains(m.flash, "deploy asks again for ok") {
		t.Fatalf("status line %q", m.flash)
	}
	if m.mode() != modeForm || !strings.Contains(screenOf(m), "before it starts · ok") || !strings.Contains(screenOf(m), "Deploy to prod?") {
		t.Fatalf("the question is not asked again:\n%s", screenOf(m))
	}
}

// A poll's outcome can come after the change that ended its task: the
// poll's copy of the record is older (the engine publishes it once the
// poll is filed). The header counts what the table shows: the ended task
// is not a problem, and its server has no failing poll.
func TestAStalePollCountsNoRow(t *testing.T) {
	working := model.NewIntent(model.ServerRef{Name: "build"}, "compile", json.RawMessage(`{}`), "", fixedNow.Add(-time.Minute))
	working.ID, working.TaskID, working.Status = "t01", "remote-t01", model.StatusWorking
	m := loaded(t, []*model.Task{working}, 160, 30)
	done := *working
	done.Status = model.StatusCompleted
	m.Update(feedMsg{events: []deck.Event{
		{Kind: deck.EventChange, Rev: 2, Prev: model.StatusWorking, Entries: []deck.Entry{{Task: &done}}},
		{Kind: deck.EventPoll, Rev: 2, Entries: []deck.Entry{{Task: working, Poll: deck.PollState{Errors: 1, LastError: "connection refused"}}}},
	}})
	press(m, "4") // the problems group
	s := screenOf(m)
	if !strings.Contains(s, "4 problems 0") || !strings.Contains(s, "0/0") {
		t.Errorf("the problems tab and the table disagree:\n%s", s)
	}
	if strings.Contains(s, "connection refused") || strings.Contains(s, "failing") || strings.Contains(s, "unreachable") {
		t.Errorf("an ended task's stale poll shows as a failing poll:\n%s", s)
	}
}
