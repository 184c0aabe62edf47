package ui

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/deck/decktest"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/internal/waitfor"
	"github.com/taskdeck/taskdeck/mcpclient"
	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
	"github.com/taskdeck/taskdeck/termtext"
)

var update = flag.Bool("update", false, "rewrite golden files")

// harness runs the root model as Bubble Tea would: every command runs in
// its own goroutine and its message comes back through Update, in order.
// The dashboard sits on a real engine over a real store, against a demo
// server on loopback (newHarness), or on an in-memory deck whose feed the
// test scripts (newDeckHarness).
type harness struct {
	t    *testing.T
	m    *Model
	msgs chan tea.Msg
	raw  []string // what tea.Raw would have printed (bell, notifications)
	demo *demo.Server
	eng  *engine.Engine
	ref  model.ServerRef
	dir  string
	cfg  *mcpconfig.Config
	opts Options // the dashboard's, but its Deck
}

// fastPolicy polls at the demo server's pace.
var fastPolicy = model.PollPolicy{Default: 20 * time.Millisecond, Floor: 10 * time.Millisecond, Cap: 100 * time.Millisecond, Growth: 1.6}

// newHarness starts a demo server on loopback and an engine on a real
// store; setup may launch tasks before the dashboard opens.
func newHarness(t *testing.T, setup func(h *harness)) *harness {
	t.Helper()
	return newHarnessWith(t, demo.Options{}, setup)
}

// newHarnessWith is newHarness with demo options (e.g. Hostile); speed and
// poll interval are the fast ones unless opts sets them.
func newHarnessWith(t *testing.T, opts demo.Options, setup func(h *harness)) *harness {
	t.Helper()
	h := &harness{t: t, msgs: make(chan tea.Msg, 4096), ref: model.ServerRef{Name: "demo"}, dir: t.TempDir()}
	opts.Speed = cmp.Or(opts.Speed, 0.05)
	opts.PollInterval = cmp.Or(opts.PollInterval, 20*time.Millisecond)
	h.demo = demo.New(opts)
	srv := httptest.NewServer(h.demo.Handler())
	var err error
	h.cfg, err = mcpconfig.ParseConfig("test", fmt.Appendf(nil, `{"mcpServers":{"demo":{"url":%q}}}`, srv.URL+"/mcp"))
	if err != nil {
		t.Fatal(err)
	}
	h.open()
	t.Cleanup(func() {
		h.eng.Close()
		srv.Close()
		h.demo.Close()
	})
	if setup != nil {
		setup(h)
	}
	h.start(h.eng)
	return h
}

// newDeckHarness opens the dashboard on an in-memory deck (no server, no
// engine) with the dashboard's options but their Deck.
func newDeckHarness(t *testing.T, d *decktest.Deck, opts Options) *harness {
	t.Helper()
	h := &harness{t: t, msgs: make(chan tea.Msg, 4096), ref: model.ServerRef{Name: "demo"}, opts: opts}
	h.start(d)
	return h
}

// start opens the dashboard on d and waits for its first snapshot.
func (h *harness) start(d deck.Deck) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	dash := h.opts
	dash.Deck = d
	h.m = New(ctx, dash)
	h.send(tea.WindowSizeMsg{Width: 120, Height: 30})
	h.run(h.m.Init())
	h.until("the feed's snapshot is in", func(m *Model) bool { return m.loaded && m.filling == nil && m.configured != nil })
}

func (h *harness) open() {
	h.t.Helper()
	var err error
	h.eng, err = engine.Open(engine.Options{DataDir: h.dir, Config: h.cfg, Policy: fastPolicy, PerServer: 4})
	if err != nil {
		h.t.Fatal(err)
	}
}

// offline closes the engine, hands its store to fn, and opens the engine
// again: what a store holds after taskdeck was away.
func (h *harness) offline(fn func(st *badger.Store)) {
	h.t.Helper()
	if err := h.eng.Close(); err != nil {
		h.t.Fatal(err)
	}
	st, err := badger.Open(h.dir, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	fn(st)
	if err := st.Close(); err != nil {
		h.t.Fatal(err)
	}
	h.open()
}

func (h *harness) call(tool, args string) *model.Task {
	h.t.Helper()
	res, err := h.eng.Call(context.Background(), deck.CallRequest{Server: h.ref, Tool: tool, Args: json.RawMessage(args)})
	if err != nil {
		h.t.Fatal(err)
	}
	return res.Task
}

// records is every record the deck holds.
func (h *harness) records() []deck.Entry {
	h.t.Helper()
	all, err := h.eng.List(context.Background(), deck.Filter{})
	if err != nil {
		h.t.Fatal(err)
	}
	return all
}

// run starts a command the way the runtime would.
func (h *harness) run(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	go func() { h.msgs <- cmd() }()
}

// send hands one message to Update and runs what it returns.
func (h *harness) send(msg tea.Msg) {
	switch msg := msg.(type) {
	case nil:
		return
	case tea.RawMsg:
		h.raw = append(h.raw, fmt.Sprint(msg.Msg))
		return
	case tea.BatchMsg: // the dashboard returns no sequences
		for _, cmd := range msg {
			h.run(cmd)
		}
		return
	}
	_, cmd := h.m.Update(msg)
	h.run(cmd)
}

func (h *harness) key(keys ...string) {
	for _, k := range keys {
		h.send(keyMsg(k))
	}
}

func keyMsg(k string) tea.KeyPressMsg {
	switch k {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "space":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "up":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	}
	r := []rune(k)[0]
	return tea.KeyPressMsg{Code: r, Text: k}
}

func (h *harness) typeText(s string) {
	for _, r := range s {
		h.send(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
}

// until processes messages until cond holds.
func (h *harness) until(what string, cond func(m *Model) bool) {
	h.t.Helper()
	h.within(what, 20*time.Second, cond)
}

// within processes messages until cond holds, failing after d (scaled by
// waitfor.Slowdown).
func (h *harness) within(what string, d time.Duration, cond func(m *Model) bool) {
	h.t.Helper()
	d = waitfor.Scale(d)
	deadline := time.After(d)
	for !cond(h.m) {
		select {
		case msg := <-h.msgs:
			h.send(msg)
		case <-deadline:
			h.t.Fatalf("not within %v: %s; screen:\n%s", d, what, h.screen())
		}
	}
}

// untilServerSays polls the task on its server, without the engine or
// the dashboard hearing of it, until the server reports the status.
func (h *harness) untilServerSays(t *model.Task, want model.Status) {
	h.t.Helper()
	ctx := context.Background()
	pool := mcpclient.NewPool(mcpclient.PoolOptions{Config: h.cfg})
	defer pool.Close()
	sess, err := pool.Session(ctx, h.ref)
	if err != nil {
		h.t.Fatal(err)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(waitfor.Scale(20 * time.Second))
	for {
		snap, err := sess.GetTask(ctx, t.TaskID)
		if err != nil {
			h.t.Fatal(err)
		}
		if snap.Status == want {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			h.t.Fatalf("the server still says %s, want %s", snap.Status, want)
		}
	}
}

func (h *harness) screen() string { return ansi.Strip(h.m.View().Content) }

func (h *harness) status(id string) model.Status {
	t, ok := h.m.list.Get(id)
	if !ok {
		return ""
	}
	return t.Status
}

func (h *harness) selectTask(id string) {
	h.t.Helper()
	i := h.m.list.IndexOf(id)
	if i < 0 {
		h.t.Fatalf("task %s is not visible", id)
	}
	h.m.cursor = i
	h.m.clampCursor()
}

func TestRowsChangeStatusLive(t *testing.T) {
	var sleep, approve *model.Task
	h := newHarness(t, func(h *harness) {
		sleep = h.call("sleep", `{"seconds":2}`)
		approve = h.call("approve", `{"action":"ship"}`)
	})
	if got := h.status(sleep.ID); got != model.StatusWorking {
		t.Fatalf("sleep shows %s at start", got)
	}
	h.until("sleep completes", func(m *Model) bool { return h.status(sleep.ID) == model.StatusCompleted })
	h.until("approve asks", func(m *Model) bool { return h.status(approve.ID) == model.StatusInputRequired })
	screen := h.screen()
	for _, want := range []string{"✓ completed", "? input_required", "2 waiting 1", "asks: Approve ship?"} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen lacks %q:\n%s", want, screen)
		}
	}
	// The bell rang when the task started waiting (its command may still
	// be on its way).
	h.until("the bell rang", func(m *Model) bool { return strings.Contains(strings.Join(h.raw, ""), "\a") })
}

func TestStartupReconciles(t *testing.T) {
	var done, gone, stale *model.Task
	h := newHarness(t, func(h *harness) {
		done = h.call("sleep", `{"seconds":1}`)
		h.untilServerSays(done, model.StatusCompleted) // it ends while "taskdeck is away"
		// A task its server never heard of, and a crash's leftover intent.
		gone = model.NewIntent(h.ref, "sleep", nil, "", time.Now())
		gone.TaskID, gone.Status = "no-such-task", model.StatusWorking
		stale = model.NewIntent(h.ref, "sleep", nil, "", time.Now())
		h.offline(func(st *badger.Store) {
			for _, rec := range []*model.Task{gone, stale} {
				if err := st.Create(rec); err != nil {
					t.Fatal(err)
				}
			}
		})
	})
	h.until("the report", func(m *Model) bool { return strings.HasPrefix(m.told(), "reconciled:") })
	want := "reconciled: 0 re-attached · 1 finished meanwhile · 1 unknown · 1 orphaned · 0 unreachable"
	if h.m.told() != want {
		t.Fatalf("report %q, want %q", h.m.told(), want)
	}
	for id, st := range map[string]model.Status{done.ID: model.StatusCompleted, gone.ID: model.StatusUnknown, stale.ID: model.StatusOrphaned} {
		if got := h.status(id); got != st {
			t.Errorf("task %s shows %s, want %s", id, got, st)
		}
	}
}

func TestAnswerInputThroughTheForm(t *testing.T) {
	var approve *model.Task
	h := newHarness(t, func(h *harness) {
		h.call("sleep", `{"seconds":600}`)
		approve = h.call("approve", `{"action":"deploy"}`)
	})
	h.until("approve asks", func(m *Model) bool { return m.list.waiting == 1 })
	h.m.cursor = h.m.list.IndexOf(approve.ID) + 1 // start elsewhere: i must find it
	h.key("i")
	if h.m.selectedID() != approve.ID {
		t.Fatalf("i selected %s, want %s", h.m.selectedID(), approve.ID)
	}
	h.key("a")
	if h.m.mode() != modeForm || !strings.Contains(h.screen(), "Approve deploy?") {
		t.Fatalf("no form after a:\n%s", h.screen())
	}
	updates := h.demo.Stats().Updates
	h.key("left", "enter") // Confirm: move to "Yes", accept it
	h.until("the reason field is focused", func(m *Model) bool { return strings.Contains(h.screen(), "┃ Reason *") })
	h.key("enter") // an empty required reason is refused
	h.until("the reason is refused", func(m *Model) bool { return strings.Contains(h.screen(), "required") })
	if h.m.mode() != modeForm || h.demo.Stats().Updates != updates {
		t.Fatalf("an empty reason was submitted:\n%s", h.screen())
	}
	h.typeText("all green")
	h.key("enter")
	h.until("approve completes", func(m *Model) bool { return h.status(approve.ID) == model.StatusCompleted })
	final, _ := h.m.list.Get(approve.ID)
	if !strings.Contains(string(final.Result), "approved deploy: all green") {
		t.Fatalf("result %s", final.Result)
	}
	if h.demo.Stats().Updates != updates+1 {
		t.Fatalf("server got %d updates, want 1", h.demo.Stats().Updates-updates)
	}
}

func TestCancelAsksFirst(t *testing.T) {
	var sleep *model.Task
	h := newHarness(t, func(h *harness) { sleep = h.call("sleep", `{"seconds":600}`) })
	h.selectTask(sleep.ID)
	h.key("c")
	if h.m.mode() != modeConfirm || !strings.Contains(h.screen(), "Cancel 1 task on the server?") {
		t.Fatalf("c did not ask:\n%s", h.screen())
	}
	if cmd := press(h.m, "n"); cmd != nil || h.m.mode() != modeTable {
		t.Fatal("saying no returned a command: the cancel may be sent")
	}
	if h.demo.Stats().Cancels != 0 || h.status(sleep.ID) != model.StatusWorking {
		t.Fatal("saying no cancelled the task")
	}
	h.key("c", "y")
	h.until("cancelled", func(m *Model) bool { return h.status(sleep.ID) == model.StatusCancelled })
	if h.demo.Stats().Cancels != 1 {
		t.Fatalf("server saw %d cancels", h.demo.Stats().Cancels)
	}
}

func TestPruneAndForgetAskWithCounts(t *testing.T) {
	var open *model.Task
	h := newHarness(t, func(h *harness) {
		h.call("echo", `{"text":"a"}`)
		h.call("echo", `{"text":"b"}`)
		open = h.call("sleep", `{"seconds":600}`)
	})
	h.key("p")
	if !strings.Contains(h.screen(), "Prune 2 finished tasks") {
		t.Fatalf("prune question:\n%s", h.screen())
	}
	h.key("y")
	h.until("pruned", func(m *Model) bool { return m.list.Len() == 1 })
	if all := h.records(); len(all) != 1 || all[0].Task.ID != open.ID {
		t.Fatalf("store after prune: %d records", len(all))
	}
	h.selectTask(open.ID)
	h.key("d")
	if !strings.Contains(h.screen(), "1 of them may still run") {
		t.Fatalf("forget of an open task must warn:\n%s", h.screen())
	}
	h.key("y")
	h.until("forgotten", func(m *Model) bool { return m.list.Len() == 0 })
	if _, err := h.eng.Get(context.Background(), open.ID); deck.KindOf(err) != deck.KindNotFound {
		t.Fatalf("forgotten task still in the store (%v)", err)
	}
}

func TestNewCallFromToolSchema(t *testing.T) {
	h := newHarness(t, nil)
	h.key("n")
	if h.m.mode() != modePick {
		t.Fatal("n did not offer servers")
	}
	h.key("enter") // the only server
	h.until("tools listed", func(m *Model) bool {
		return m.mode() == modePick && strings.Contains(m.toolPick.title, "choose a tool")
	})
	for h.m.toolPick.items[h.m.toolPick.cursor] != "sleep" {
		h.key("down")
	}
	h.key("enter")
	if h.m.mode() != modeForm {
		t.Fatalf("no argument form:\n%s", h.screen())
	}
	h.typeText("1")
	h.key("enter")
	// The last field is the optional idempotency key (item 15).
	keyField := func(m *Model) bool { return strings.Contains(h.screen(), "┃ Idempotency key (optional)") }
	h.until("the key field focused", keyField)
	h.typeText("nightly-1")
	h.key("enter")
	h.until("launched", func(m *Model) bool { return m.list.Len() == 1 })
	h.until("done", func(m *Model) bool { return m.list.all[0].task.Status == model.StatusCompleted })
	first := h.m.list.all[0].task
	if got := string(first.Arguments); got != `{"seconds":1}` || first.IdempotencyKey != "nightly-1" {
		t.Fatalf("arguments %s, key %q", got, first.IdempotencyKey)
	}

	// The same call under the same key launches nothing, and says so.
	h.key("n", "enter")
	h.until("tools listed again", func(m *Model) bool { return m.mode() == modePick && m.toolPick != nil })
	for h.m.toolPick.items[h.m.toolPick.cursor] != "sleep" {
		h.key("down")
	}
	h.key("enter")
	h.typeText("1")
	h.key("enter")
	h.until("the key field focused", keyField)
	h.typeText("nightly-1")
	h.key("enter")
	h.until("the key's answer", func(m *Model) bool {
		return strings.Contains(m.flash, "already names it, nothing sent: task "+first.ID)
	})
	if n := h.m.list.Len(); n != 1 || h.demo.Stats().ToolCalls["sleep"] != 1 {
		t.Fatalf("a call again under its key made %d records, %d calls", n, h.demo.Stats().ToolCalls["sleep"])
	}
}

// loaded builds a dashboard on fixed tasks, with no server behind it:
// the tasks come as the feed's snapshot.
func loaded(t testing.TB, tasks []*model.Task, w, h int) *Model {
	return loadedOn(t, decktest.New(nil), tasks, w, h, Options{})
}

// loadedWith is loaded on an engine with a server config and options, for
// what the engine makes of the config (servers, endpoints): no server
// runs unless the test starts one, and nothing is polled.
func loadedWith(t testing.TB, tasks []*model.Task, w, h int, config string, opts Options) *Model {
	t.Helper()
	cfg, err := mcpconfig.ParseConfig("test", []byte(config))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(engine.Options{DataDir: t.TempDir(), Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return loadedOn(t, eng, tasks, w, h, opts)
}

// loadedOn is the dashboard on a deck, sized, with its servers listed and
// a snapshot of tasks handed to it (the feed is not watched).
func loadedOn(t testing.TB, d deck.Deck, tasks []*model.Task, w, h int, opts Options) *Model {
	t.Helper()
	opts.Deck = d
	opts.Now = func() time.Time { return fixedNow }
	m := New(context.Background(), opts)
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	m.Update(listServers(context.Background(), d)())
	m.Update(snapshotOf(tasks))
	return m
}

// snapshotOf is the feed's first batch: a snapshot of tasks.
func snapshotOf(tasks []*model.Task) feedMsg {
	entries := make([]deck.Entry, len(tasks))
	for i, t := range tasks {
		entries[i] = deck.Entry{Task: t}
	}
	return feedMsg{events: []deck.Event{{Kind: deck.EventSnapshot, Rev: 1, Entries: entries}}}
}

var fixedNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// sampleTasks is one task per status, with a tool error and a hostile
// status message among them.
func sampleTasks() []*model.Task {
	var tasks []*model.Task
	add := func(tool string, st model.Status, msg string, age time.Duration) *model.Task {
		at := fixedNow.Add(-age)
		t := model.NewIntent(model.ServerRef{Name: "build"}, tool, json.RawMessage(`{}`), "", at)
		t.ID = fmt.Sprintf("t%02d", len(tasks)) // stable ids for the golden file
		t.Status, t.StatusMessage, t.UpdatedAt = st, msg, at.Add(age/2)
		if st != model.StatusCalling && st != model.StatusOrphaned {
			t.TaskID = "remote-" + t.ID
		}
		tasks = append(tasks, t)
		return t
	}
	add("compile", model.StatusWorking, "step 3 of 7: linking", 2*time.Minute)
	ask := add("deploy", model.StatusInputRequired, "", 5*time.Minute)
	ask.InputRequests = map[string]model.InputRequest{"ok": {Method: "elicitation/create",
		Params: json.RawMessage(`{"message":"Deploy to prod?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}`)}}
	add("test", model.StatusCompleted, "all 412 tests passed", time.Hour)
	add("lint", model.StatusCompleted, "3 issues", 2*time.Hour).IsError = true
	add("package", model.StatusFailed, "disk full", 3*time.Hour)
	add("index", model.StatusCancelled, "", 26*time.Hour)
	add("report", model.StatusUnknown, "", 50*time.Hour)
	add("migrate", model.StatusOrphaned, "the call was sent but no handle came back", 10*time.Second)
	add("evil", model.StatusWorking, "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;ZXZpbA==\x07\u202eetoh\x00 ok", time.Second)
	return tasks
}

func TestTableGolden(t *testing.T) {
	m := loaded(t, sampleTasks(), 80, 24)
	got := ansi.Strip(m.View().Content)
	path := filepath.Join("testdata", "table-80x24.golden")
	if *update {
		os.MkdirAll("testdata", 0o755)
		os.WriteFile(path, []byte(got), 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./ui -run Golden -update)", err)
	}
	if got != string(want) {
		t.Fatalf("table differs from %s (rerun with -update if intended):\n%s", path, got)
	}
}

// onlySGR matches the escape sequences the renderer may carry: colours
// and text attributes. Anything else on screen came from a server.
var escapeSeq = regexp.MustCompile("\x1b\\[[0-9;:]*m")

func TestServerTextCannotControlTheTerminal(t *testing.T) {
	tasks := sampleTasks()
	m := loaded(t, tasks, 120, 30)
	evil := tasks[len(tasks)-1]
	screens := []string{m.View().Content}
	m.cursor = m.list.IndexOf(evil.ID)
	m.openDetail()
	screens = append(screens, m.View().Content)
	for _, s := range screens {
		rest := escapeSeq.ReplaceAllString(s, "")
		for _, bad := range []string{"\x1b", "\x07", "\x00", "\u202e"} {
			if strings.Contains(rest, bad) {
				t.Fatalf("server text reached the screen with %q:\n%q", bad, rest)
			}
		}
	}
	if !strings.Contains(ansi.Strip(screens[1]), "etoh ok") {
		t.Fatal("the harmless part of the message is gone")
	}
}

func TestSmallTerminalKeepsLayout(t *testing.T) {
	m := loaded(t, sampleTasks(), 80, 24)
	for _, mode := range []func(){func() {}, func() { m.openDetail() }, func() { m.helpOpen = true }} {
		mode()
		lines := strings.Split(m.View().Content, "\n")
		if len(lines) != 24 {
			t.Fatalf("%d lines on a 24-line terminal", len(lines))
		}
		for _, l := range lines {
			if w := ansi.StringWidth(l); w > 80 {
				t.Fatalf("line of %d cells on an 80-column terminal: %q", w, ansi.Strip(l))
			}
		}
		if !strings.Contains(ansi.Strip(lines[len(lines)-1]), "quit") {
			t.Fatalf("footer lost: %q", ansi.Strip(lines[len(lines)-1]))
		}
		m.detail, m.helpOpen = nil, false
	}
}

func TestFilterSortMarkAndCopy(t *testing.T) {
	tasks := sampleTasks()
	m := loaded(t, tasks, 120, 30)
	h := &harness{t: t, m: m, msgs: make(chan tea.Msg, 16)}
	h.key("/")
	h.typeText("link")
	if n := len(m.list.visible); n != 1 || m.list.visible[0].tool != "compile" {
		t.Fatalf("filter 'link' shows %d rows", n)
	}
	h.key("esc")
	if len(m.list.visible) != len(tasks) {
		t.Fatal("esc did not clear the filter")
	}
	h.key("s") // first status in the cycle: calling (none here)
	h.key("s") // working
	if n := len(m.list.visible); n != 2 {
		t.Fatalf("status filter working shows %d rows", n)
	}
	for range len(model.AllStatuses) - 1 { // the cycle: every status, then all
		h.key("s")
	}
	if len(m.list.visible) != len(tasks) {
		t.Fatal("the status filter does not cycle back to all")
	}
	h.key("o")
	if m.list.OrderName() != "status" || m.list.visible[0].task.Status != model.StatusWorking {
		t.Fatalf("sort %s starts with %s", m.list.OrderName(), m.list.visible[0].task.Status)
	}
	m.cursor = 0
	h.key("space", "space")
	if len(m.marked) != 2 || len(m.targets()) != 2 {
		t.Fatalf("marked %v", m.marked)
	}
	done := tasks[2]
	done.Result = json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)
	m.list.Upsert(done)
	m.cursor = m.list.IndexOf(done.ID)
	clear(m.marked)
	_, cmd := m.Update(keyMsg("y"))
	if cmd == nil || fmt.Sprint(cmd()) != string(done.Result) {
		t.Fatal("y did not copy the result JSON")
	}
}

// Within each mode, no key means two things, and every key says what it does.
func TestKeyMapHasNoClashes(t *testing.T) {
	modes := DefaultKeyMap().modeKeys()
	for mode := modeTable; mode <= modePalette; mode++ {
		if _, ok := modes[mode]; !ok && mode != modeHelp { // in help any key closes it
			t.Errorf("mode %d has no key list", mode)
		}
	}
	for mode, bindings := range modes {
		seen := map[string]string{}
		for _, b := range bindings {
			if b.Help().Desc == "" {
				t.Errorf("mode %d: binding %v has no help text", mode, b.Keys())
			}
			for _, key := range b.Keys() {
				if other, ok := seen[key]; ok {
					t.Errorf("mode %d: key %q bound to both %q and %q", mode, key, other, b.Help().Desc)
				}
				seen[key] = b.Help().Desc
			}
		}
	}
}

func TestNewCallThatAsksBeforeItStarts(t *testing.T) {
	h := newHarness(t, nil)
	h.key("n", "enter")
	h.until("tools listed", func(m *Model) bool {
		return m.mode() == modePick && strings.Contains(m.toolPick.title, "choose a tool")
	})
	for h.m.toolPick.items[h.m.toolPick.cursor] != "confirm_first" {
		h.key("down")
	}
	h.key("enter") // confirm_first takes no arguments: the form only submits
	h.until("the argument form", func(m *Model) bool { return m.mode() == modeForm && strings.Contains(h.screen(), "takes no arguments") })
	h.key("enter")
	h.until("the server's question", func(m *Model) bool { return m.mode() == modeForm && strings.Contains(h.screen(), "Run confirm_first?") })
	h.key("left", "enter") // yes
	h.until("the task runs and ends", func(m *Model) bool {
		return m.list.Len() == 1 && m.list.all[0].task.Status == model.StatusCompleted
	})
	if done := h.m.list.all[0].task; done.IsError || !strings.Contains(string(done.Result), `"text":"confirmed"`) {
		t.Fatalf("result %s", done.Result)
	}
	// One record, and one round of input cost two tools/call: the first,
	// and the one with the answer.
	if all := h.records(); len(all) != 1 {
		t.Fatalf("store holds %d records, want the call's one", len(all))
	}
	if n := h.demo.Stats().ToolCalls["confirm_first"]; n != 2 {
		t.Fatalf("the server got %d tools/call, want 2", n)
	}
}

// The snapshot shows every open task and the newest finished ones (up to
// Options.Recent), says how many it leaves out, and keeps the selected
// task on its line when a later snapshot (a feed watched again) comes.
func TestSnapshotShowsOpenAndNewestFinished(t *testing.T) {
	var tasks []*model.Task
	var open, done []string
	for i := range 16 {
		rec := model.NewIntent(model.ServerRef{Name: "demo"}, "sleep", nil, "", fixedNow.Add(time.Duration(i)*time.Second))
		rec.Status = model.StatusCompleted
		if i < 6 { // the oldest six are still open
			rec.Status, rec.TaskID = model.StatusWorking, fmt.Sprint("remote-", i)
			open = append(open, rec.ID)
		} else {
			done = append(done, rec.ID)
		}
		tasks = append(tasks, rec)
	}
	m := loadedOn(t, decktest.New(nil), nil, 120, 8, Options{Recent: 5}) // 4 rows: the list scrolls
	m.Update(snapshotOf(tasks))
	screen := screenOf(m)
	if m.list.Len() != 11 || m.hidden != 5 || !strings.Contains(screen, "/11 (+5 older finished not shown)") {
		t.Fatalf("want 6 open + 5 newest finished, 5 hidden; got %d, %d hidden:\n%s", m.list.Len(), m.hidden, screen)
	}
	for _, id := range append(slices.Clone(open), done[len(done)-5:]...) {
		if _, ok := m.list.Get(id); !ok {
			t.Errorf("task %s not shown", id)
		}
	}
	h := &harness{t: t, m: m, msgs: make(chan tea.Msg, 16)}
	h.key("down", "down", "down", "down", "down", "down") // the operator picks a task further down
	picked, line := m.selectedID(), m.cursor-m.top
	// The feed is watched again: a snapshot without the newest record.
	m.Update(snapshotOf(slices.DeleteFunc(slices.Clone(tasks), func(t *model.Task) bool { return t.ID == done[len(done)-1] })))
	if m.selectedID() != picked || m.cursor-m.top != line {
		t.Fatalf("selection moved to %s at line %d, was %s at line %d", m.selectedID(), m.cursor-m.top, picked, line)
	}
	if m.list.Len() != 11 || m.hidden != 4 {
		t.Fatalf("after the second snapshot: %d shown, %d hidden; want 11 and 4", m.list.Len(), m.hidden)
	}
	// A hidden record deleted: one fewer left out.
	m.Update(feedMsg{events: []deck.Event{{Kind: deck.EventChange, Rev: 2, Deleted: []string{done[0]}}}})
	if m.hidden != 3 || m.list.Len() != 11 {
		t.Fatalf("after deleting a hidden record: %d shown, %d hidden; want 11 and 3", m.list.Len(), m.hidden)
	}
}

func TestWaitingForInputRingsAndNotifies(t *testing.T) {
	tasks := sampleTasks()
	for _, notify := range []bool{false, true} {
		m := loaded(t, tasks, 120, 30)
		m.opts.Notify = notify
		m.opts.Desktop = termtext.DesktopNotification(func(k string) string { return map[string]string{"TERM": "xterm-256color"}[k] })
		h := &harness{t: t, m: m, msgs: make(chan tea.Msg, 16)}
		asks := tasks[1].Clone() // deploy, waiting for input
		asks.Tool = "deploy;\x1b]0;evil\x07"
		h.send(m.alert(asks)())
		raw := strings.Join(h.raw, "|")
		if !strings.Contains(raw, "\a") {
			t.Fatalf("notify=%v: no bell in %q", notify, raw)
		}
		osc := strings.Contains(raw, "\x1b]9;")
		if osc != notify {
			t.Fatalf("notify=%v: OSC 9 sent = %v (%q)", notify, osc, raw)
		}
		if notify && raw != "\a\x1b]9;taskdeck: deploy  waits for input\a" {
			t.Fatalf("notification carries server control text: %q", raw)
		}
	}
}

// told is the text of the notices on the status line, oldest first.
func (m *Model) told() string {
	parts := make([]string, len(m.notices))
	for i, n := range m.notices {
		parts[i] = n.text
	}
	return strings.Join(parts, " · ")
}

// What comes in unasked is told after the answer to the last key, the
// newest two at most, and each goes after flashFor like the answer.
func TestStatusLineKeepsTheKeysAnswer(t *testing.T) {
	m := loaded(t, sampleTasks(), 200, 30)
	m.say("the answer")
	m.tell("first")
	m.tell("second")
	m.warn(errors.New("third went wrong"))
	lines := strings.Split(screenOf(m), "\n")
	if status := lines[len(lines)-2]; !strings.HasSuffix(strings.TrimRight(status, " "), "the answer · second · third went wrong") {
		t.Fatalf("status line %q: want the answer, then the two newest notices", status)
	}
	// A failure told unasked looks like one, the rest as before.
	raw := strings.Split(m.View().Content, "\n")
	if status := raw[len(raw)-2]; !strings.Contains(status, m.styles.Error.Render(" · third went wrong")) ||
		!strings.Contains(status, m.styles.Flash.Render(" · second")) {
		t.Fatalf("the notices are not styled as what they tell: %q", status)
	}
	m.Update(tickMsg(fixedNow.Add(flashFor - time.Second)))
	if m.flash != "the answer" || m.told() != "second · third went wrong" {
		t.Fatalf("%v on, before flashFor, the status line says %q and %q", flashFor-time.Second, m.flash, m.told())
	}
	m.Update(tickMsg(fixedNow.Add(flashFor)))
	if m.flash != "" || m.told() != "" {
		t.Fatalf("after %v the status line still says %q and %q", flashFor, m.flash, m.told())
	}
}
