// Package ui is taskdeck's dashboard: one Bubble Tea root model that
// shows every task live and acts on it by keypress. All IO happens in
// commands (commands.go); Update only changes state.
package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/mcpclient"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
	"github.com/taskdeck/taskdeck/ui/form"
	"github.com/taskdeck/taskdeck/ui/present"
)

// Options configure the dashboard.
type Options struct {
	Tracker *mcpclient.Tracker
	// Servers are the configured server names offered by `n`.
	Servers []string
	// PerServer bounds polls in flight per server.
	PerServer int
	// Notify sends the desktop-notification escape (OSC 9) besides the
	// bell when a task starts waiting for input.
	Notify bool
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Greeting is shown in the status line at start.
	Greeting string
	// Recent bounds the finished tasks loaded (every open task is); 20,000
	// when zero.
	Recent int
	// ListTimeout bounds listing a server's tools for a new call; 30 s
	// (the command line's request timeout) when zero.
	ListTimeout time.Duration
}

// listing is a tools/list in flight for a new call.
type listing struct {
	server string
	gen    int
	cancel context.CancelFunc
}

// flashFor is how long a status-line message stays.
const flashFor = 5 * time.Second

// mode is what takes the keys: the table, or what is open over it.
type mode int

const (
	modeTable mode = iota
	modeDetail
	modeFilter
	modeHelp
	modeConfirm
	modeForm
	modePick
)

// pollNote is what the table shows about a task's polling.
type pollNote struct {
	err error
}

// Model is the dashboard's root model.
type Model struct {
	ctx     context.Context
	tracker *mcpclient.Tracker
	opts    Options
	keys    KeyMap
	styles  Styles
	help    help.Model

	width, height int

	list   *taskList
	cursor int
	top    int
	marked map[string]bool

	sched *model.Schedule
	polls map[string]pollNote
	// startup holds tasks whose first poll after start is pending, for the
	// reconciliation report.
	startup map[string]bool
	load    tea.Cmd // reads the store for the first frame
	report  mcpclient.Report
	loaded  bool // the open tasks are in the list
	hidden  int  // older records not loaded (see Options.Recent)
	// loadGen numbers the loads of the list; recent records of an older
	// load are dropped. Until they arrive, forgotten is non-nil and holds
	// what was forgotten meanwhile, not to be merged back.
	loadGen   int
	forgotten map[string]bool

	filter       textinput.Model
	filtering    bool // the filter prompt takes the keys
	statusFilter model.Status
	helpOpen     bool
	// The overlays, nil when closed. Where several are open (a question
	// asked from a form, a tool list that came while a form was open),
	// mode says which one takes the keys.
	detail   *detailPane
	servers  *picker[string]     // a new call's server
	tools    *picker[toolChoice] // a new call's tool
	form     *formPane
	question *question
	listing  *listing

	flash    string
	flashErr bool
	flashAt  time.Time
	now      time.Time
	listings int // numbers the tools listings, so an abandoned one is dropped
}

// New builds the dashboard. ctx bounds every command it starts.
func New(ctx context.Context, opts Options) *Model {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PerServer <= 0 {
		opts.PerServer = mcpclient.DefaultPerServer
	}
	if opts.Recent <= 0 {
		opts.Recent = 20_000
	}
	fi := textinput.New()
	fi.Prompt = "/"
	m := &Model{
		ctx: ctx, tracker: opts.Tracker, opts: opts,
		keys: DefaultKeyMap(), styles: DefaultStyles(), help: help.New(),
		width: 80, height: 24,
		list: newTaskList(), marked: map[string]bool{},
		sched: model.NewSchedule(opts.PerServer), polls: map[string]pollNote{},
		startup: map[string]bool{}, load: startup(opts.Tracker),
		filter: fi, now: opts.Now(),
	}
	if opts.ListTimeout <= 0 {
		m.opts.ListTimeout = 30 * time.Second
	}
	m.say(opts.Greeting)
	return m
}

// startupMsg is the store's open tasks as found at start, stale intents
// orphaned. The finished records follow in a recentLoadedMsg.
type startupMsg struct {
	openLoadedMsg
	orphans []*model.Task
}

func startup(tr *mcpclient.Tracker) tea.Cmd {
	return func() tea.Msg {
		orphans, err := tr.OrphanStale()
		if err != nil {
			return startupMsg{openLoadedMsg: openLoadedMsg{err: err}}
		}
		return startupMsg{openLoadedMsg: readOpen(tr), orphans: orphans}
	}
}

// Init loads the store and starts the scheduler's heartbeat.
func (m *Model) Init() tea.Cmd {
	return tea.Batch(m.load, tick())
}

// Update is the only place state changes.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.help.SetWidth(msg.Width)
		if m.detail != nil {
			m.detail.SetSize(m.detailSize())
		}
		if m.form != nil {
			m.form.form.SetSize(msg.Width-4, m.height-6)
		}
		m.clampCursor()
		return m, nil
	case startupMsg:
		return m, m.onStartup(msg)
	case openLoadedMsg:
		if msg.err != nil {
			return m, m.fail(msg.err)
		}
		return m, m.showOpen(msg.tasks)
	case recentLoadedMsg:
		return m, m.onRecent(msg)
	case tickMsg:
		m.now = time.Time(msg)
		// A tools listing in flight keeps its line until it ends.
		if m.flash != "" && m.listing == nil && m.now.Sub(m.flashAt) >= flashFor {
			m.flash, m.flashErr = "", false
		}
		return m, tea.Batch(append(m.startDuePolls(), tick())...)
	case polledMsg:
		return m, m.onPolled(msg)
	case taskUpdatedMsg:
		return m, m.onTaskUpdated(msg)
	case forgottenMsg:
		selected, cursor := m.selectedID(), m.cursor
		for _, id := range msg.ids {
			if m.recentPending() {
				m.forgotten[id] = true
			}
			m.list.Remove(id)
			m.sched.Remove(id)
			delete(m.marked, id)
			delete(m.polls, id)
		}
		m.cursor = cursor
		m.keepSelected(selected)
		if msg.err != nil {
			return m, m.fail(msg.err)
		}
		m.say("forgot " + present.Count(len(msg.ids), "task"))
		return m, nil
	case prunedMsg:
		if msg.err != nil {
			return m, m.fail(msg.err)
		}
		m.say("pruned " + present.Count(msg.n, "finished task"))
		return m, loadOpen(m.tracker)
	case toolsMsg:
		return m, m.onTools(msg)
	case tea.KeyPressMsg:
		return m, m.onKey(msg)
	}
	// What the open form's and the filter prompt's own commands return.
	if m.mode() == modeForm {
		return m, m.updateForm(msg)
	}
	if m.mode() == modeFilter {
		var cmd tea.Cmd
		m.filter, cmd = m.filter.Update(msg)
		return m, cmd
	}
	return m, nil
}

func (m *Model) onStartup(msg startupMsg) tea.Cmd {
	if msg.err != nil {
		return m.fail(msg.err)
	}
	recent := m.showOpen(msg.tasks)
	m.loaded = true
	m.report.Orphaned = msg.orphans
	// Every open task is polled soon, spread over up to two seconds so a
	// large store does not hit its servers all at once.
	var open []*model.Task
	for _, t := range msg.tasks {
		if t.Status.Pollable() {
			open = append(open, t)
		}
	}
	m.sched.Grow(len(open))
	m.startup = make(map[string]bool, len(open))
	spread := min(time.Duration(len(open))*2*time.Millisecond, 2*time.Second)
	for i, t := range open {
		at := m.now
		if len(open) > 1 {
			at = at.Add(spread * time.Duration(i) / time.Duration(len(open)))
		}
		m.sched.Set(t.ID, t.Server, at)
		m.startup[t.ID] = true
	}
	if len(open) == 0 {
		m.reportStartup()
	}
	return recent
}

// showOpen replaces the list with the open tasks, so that they are on
// screen at once, and loads the recent finished records after them.
func (m *Model) showOpen(open []*model.Task) tea.Cmd {
	m.list.Replace(open)
	m.clampCursor()
	m.hidden = 0
	m.loadGen++
	m.forgotten = map[string]bool{}
	ids := make([]string, len(open))
	for i, t := range open {
		ids[i] = t.ID
	}
	return loadRecent(m.tracker, m.loadGen, m.opts.Recent, ids)
}

// recentPending tells whether the recent finished records of the last
// load are still to come.
func (m *Model) recentPending() bool { return m.forgotten != nil }

// onRecent merges the recent finished records into the list. Tasks it
// already holds keep their version, which is as new or newer; the
// selected task stays selected, on the same line of the screen.
func (m *Model) onRecent(msg recentLoadedMsg) tea.Cmd {
	if msg.gen != m.loadGen {
		return nil // the list was loaded again since
	}
	forgotten := m.forgotten
	m.forgotten = nil
	if msg.err != nil {
		return m.fail(msg.err)
	}
	tasks := slices.DeleteFunc(msg.tasks, func(t *model.Task) bool { return forgotten[t.ID] })
	selected, line := m.selectedID(), m.cursor-m.top
	m.list.Merge(tasks)
	m.hidden = msg.hidden
	if i := m.list.IndexOf(selected); i >= 0 {
		m.cursor, m.top = i, i-line
	}
	m.clampCursor()
	return nil
}

// reportStartup says what start-up reconciliation found.
func (m *Model) reportStartup() {
	m.say(m.report.String())
}

func (m *Model) startDuePolls() []tea.Cmd {
	var cmds []tea.Cmd
	for _, id := range m.sched.Take(m.now) {
		cmds = append(cmds, poll(m.ctx, m.tracker, id))
	}
	return cmds
}

func (m *Model) onPolled(msg polledMsg) tea.Cmd {
	old, known := m.list.Get(msg.id)
	if !known {
		return nil // forgotten meanwhile: a stale answer
	}
	if msg.err != nil {
		m.sched.Done(msg.id, time.Time{})
		return m.fail(msg.err)
	}
	res := msg.res
	var next time.Time
	if res.Next > 0 {
		next = m.opts.Now().Add(res.Next)
	}
	m.sched.Done(msg.id, next)
	m.polls[msg.id] = pollNote{err: res.Err}
	m.replaceTask(res.Task)
	if m.startup[msg.id] {
		delete(m.startup, msg.id)
		m.report.Add(res)
		if len(m.startup) == 0 {
			m.reportStartup()
		}
	}
	if old.Status != model.StatusInputRequired && res.Task.Status == model.StatusInputRequired {
		return m.alert(res.Task)
	}
	return nil
}

// alert rings the bell (and notifies the desktop where asked) when a
// task starts waiting for input.
func (m *Model) alert(t *model.Task) tea.Cmd {
	m.say(fmt.Sprintf("task %s (%s) waits for input: press i then a", t.ID, termtext.Line(t.Tool)))
	out := "\a"
	if m.opts.Notify {
		// Sanitized text has no ESC or BEL to end the sequence early; a
		// ';' would start a new OSC 9 parameter in some terminals.
		text := strings.ReplaceAll("taskdeck: "+termtext.Line(t.Tool)+" waits for input", ";", " ")
		out += "\x1b]9;" + text + "\a"
	}
	return tea.Raw(out) // one write: the bell, then the notification
}

// keepSelected puts the cursor back on the task selected before the list
// changed, where it is still shown.
func (m *Model) keepSelected(id string) {
	if i := m.list.IndexOf(id); id != "" && i >= 0 {
		m.cursor = i
	}
	m.clampCursor()
}

// replaceTask puts a new version of a task in the list, keeping the
// selection on the same task.
func (m *Model) replaceTask(t *model.Task) {
	selected := m.selectedID()
	m.list.Upsert(t)
	m.keepSelected(selected)
	if m.detail != nil && m.detail.id == t.ID {
		m.detail.vp.SetContent(m.detailText(t))
	}
}

func (m *Model) onTaskUpdated(msg taskUpdatedMsg) tea.Cmd {
	if msg.task != nil {
		m.replaceTask(msg.task)
		if msg.task.Status.Pollable() {
			m.sched.Set(msg.task.ID, msg.task.Server, m.opts.Now())
		}
	}
	var need *mcpclient.InputNeededError
	if msg.call != nil && errors.As(msg.err, &need) {
		// The server asks before it starts: nothing runs there yet, so
		// the attempt's record goes and the call is made again with answers.
		msg.call.asks = need.Requests
		cmd := m.askBeforeCall(msg.call)
		if msg.task != nil {
			return tea.Batch(cmd, forget(m.tracker, []string{msg.task.ID}))
		}
		return cmd
	}
	if msg.err != nil {
		return m.fail(msg.err)
	}
	m.say(fmt.Sprintf("%s: task %s", msg.verb, msg.task.ID))
	// More questions on the same task: ask the next one right away.
	if msg.verb == "answered" && len(msg.task.PendingInputs()) > 0 {
		return m.openAnswer(msg.task)
	}
	return nil
}

func (m *Model) onTools(msg toolsMsg) tea.Cmd {
	if m.listing == nil || msg.gen != m.listing.gen {
		return nil // abandoned with esc
	}
	m.endListing()
	m.say("")
	if msg.err != nil {
		if errors.Is(msg.err, context.DeadlineExceeded) {
			return m.fail(fmt.Errorf("server %s did not list its tools within %v", msg.server, m.opts.ListTimeout))
		}
		return m.fail(fmt.Errorf("server %s did not list its tools: %w", msg.server, msg.err))
	}
	if len(msg.tools) == 0 {
		m.say("server " + msg.server + " offers no tools")
		return nil
	}
	p := &picker[toolChoice]{title: "New call on " + msg.server + ": choose a tool"}
	for _, t := range msg.tools {
		p.values = append(p.values, toolChoice{server: msg.server, tool: t})
		p.items = append(p.items, termtext.Line(t.Name))
		p.notes = append(p.notes, termtext.Line(t.Description))
	}
	m.tools = p
	return nil
}

// toolChoice is one item of the tool picker.
type toolChoice struct {
	server string
	tool   *mcp.Tool
}

// mode tells what takes the keys: the question over everything, else
// the overlay that is open, else the table.
func (m *Model) mode() mode {
	switch {
	case m.question != nil:
		return modeConfirm
	case m.form != nil:
		return modeForm
	case m.servers != nil || m.tools != nil:
		return modePick
	case m.detail != nil:
		return modeDetail
	case m.helpOpen:
		return modeHelp
	case m.filtering:
		return modeFilter
	}
	return modeTable
}

// onKey routes a key to what is open, and acts on its outcome.
func (m *Model) onKey(msg tea.KeyPressMsg) tea.Cmd {
	switch m.mode() {
	case modeConfirm:
		a, done := m.question.Update(msg, m.keys)
		if !done {
			return nil
		}
		m.question = nil
		return m.onAnswer(a)
	case modeForm:
		return m.updateForm(msg)
	case modePick:
		return m.keyPick(msg)
	case modeDetail:
		out, cmd := m.detail.Update(msg, m.keys)
		switch out {
		case detailClose:
			m.detail = nil
		case detailPass:
			cmd = m.keyTable(msg)
			if m.mode() != modeDetail {
				m.detail = nil // what the key opened takes the screen
			}
		}
		return cmd
	case modeHelp:
		m.helpOpen = false
		return nil
	case modeFilter:
		return m.keyFilter(msg)
	}
	return m.keyTable(msg)
}

func (m *Model) keyTable(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys
	page := max(m.tableHeight()-1, 1)
	switch {
	case key.Matches(msg, k.Quit):
		return m.quit()
	case key.Matches(msg, k.Up):
		m.moveCursor(-1)
	case key.Matches(msg, k.Down):
		m.moveCursor(1)
	case key.Matches(msg, k.PageUp):
		m.moveCursor(-page)
	case key.Matches(msg, k.PageDown):
		m.moveCursor(page)
	case key.Matches(msg, k.Top):
		m.moveCursor(-len(m.list.visible))
	case key.Matches(msg, k.Bottom):
		m.moveCursor(len(m.list.visible))
	case key.Matches(msg, k.Detail):
		return m.openDetail()
	case key.Matches(msg, k.Back):
		if m.listing != nil {
			m.say("stopped listing the tools of " + m.listing.server)
			m.endListing()
			return nil
		}
		clear(m.marked)
		if m.filter.Value() != "" || m.statusFilter != "" {
			m.filter.SetValue("")
			m.statusFilter = ""
			m.applyFilter()
			m.say("showing every task")
		}
	case key.Matches(msg, k.Filter):
		m.filtering = true
		m.detail = nil
		return m.filter.Focus()
	case key.Matches(msg, k.StatusFilter):
		m.cycleStatusFilter()
	case key.Matches(msg, k.Sort):
		selected := m.selectedID()
		m.list.CycleOrder()
		m.cursor = max(m.list.IndexOf(selected), 0)
		m.clampCursor()
		m.say("sorted by " + m.list.OrderName())
	case key.Matches(msg, k.Mark):
		if id := m.selectedID(); id != "" {
			if m.marked[id] {
				delete(m.marked, id)
			} else {
				m.marked[id] = true
			}
			m.moveCursor(1)
		}
	case key.Matches(msg, k.NextInput):
		m.jumpToInput()
	case key.Matches(msg, k.Answer):
		if t := m.selected(); t != nil {
			return m.openAnswer(t)
		}
	case key.Matches(msg, k.Cancel):
		return m.askCancel()
	case key.Matches(msg, k.Forget):
		return m.askForget()
	case key.Matches(msg, k.Prune):
		return m.askPrune()
	case key.Matches(msg, k.PollNow):
		n := 0
		for _, t := range m.targets() {
			if t.Status.Pollable() {
				m.sched.Set(t.ID, t.Server, m.opts.Now())
				n++
			}
		}
		if n == 0 {
			m.say("nothing to poll: only working or waiting tasks are polled")
		} else {
			m.say(fmt.Sprintf("polling %s now", present.Count(n, "task")))
		}
	case key.Matches(msg, k.NewCall):
		return m.startNewCall()
	case key.Matches(msg, k.Copy):
		return m.copyResult()
	case key.Matches(msg, k.Help):
		m.helpOpen = true
		m.detail = nil
	}
	return nil
}

func (m *Model) keyFilter(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case key.Matches(msg, m.keys.Keep):
		m.filtering = false
		m.filter.Blur()
		return nil
	case key.Matches(msg, m.keys.Clear):
		m.filtering = false
		m.filter.Blur()
		m.filter.SetValue("")
		m.applyFilter()
		return nil
	}
	var cmd tea.Cmd
	m.filter, cmd = m.filter.Update(msg)
	m.applyFilter()
	return cmd
}

// onAnswer does what a question's answer says. No returns to what is
// under the question: the form it was asked from, or the table.
func (m *Model) onAnswer(a reply) tea.Cmd {
	switch a.act {
	case 0:
		if m.form == nil {
			m.say("nothing done")
		}
		return nil
	case actCancel:
		clear(m.marked)
		return cancelTasks(m.ctx, m.tracker, a.ids)
	case actForget:
		clear(m.marked)
		return forget(m.tracker, a.ids)
	case actPrune:
		return prune(m.tracker)
	case actQuit:
		return tea.Quit
	case actDecline:
		return m.finishForm(form.Result{Action: form.Decline})
	case actCancelInput:
		return m.finishForm(form.Result{Action: form.Cancel})
	}
	return nil
}

// keyPick routes a key to the open picker: a chosen server lists its
// tools, a chosen tool opens the form for its arguments.
func (m *Model) keyPick(msg tea.KeyPressMsg) tea.Cmd {
	if p := m.servers; p != nil {
		out, done := p.Update(msg, m.keys)
		if !done {
			return nil
		}
		m.servers = nil
		if out.back {
			return nil
		}
		return m.listTools(out.value)
	}
	out, done := m.tools.Update(msg, m.keys)
	if !done {
		return nil
	}
	m.tools = nil
	if out.back {
		return nil
	}
	c := out.value
	raw, _ := json.Marshal(c.tool.InputSchema)
	f, err := form.ForArguments(c.server+" · "+termtext.Line(c.tool.Name), raw)
	if err != nil {
		return m.fail(err)
	}
	// The call goes out under the server's own name of the tool, not the shown one.
	return m.openForm(f, formTarget{call: &newCall{server: c.server, tool: c.tool.Name, answers: map[string]json.RawMessage{}}})
}

func (m *Model) applyFilter() {
	selected := m.selectedID()
	m.list.SetFilter(m.filter.Value(), m.statusFilter)
	m.cursor = max(m.list.IndexOf(selected), 0)
	m.clampCursor()
}

func (m *Model) cycleStatusFilter() {
	i := slices.Index(model.AllStatuses, m.statusFilter) // -1 for "all"
	if i+1 < len(model.AllStatuses) {
		m.statusFilter = model.AllStatuses[i+1]
		m.say("showing " + string(m.statusFilter))
	} else {
		m.statusFilter = ""
		m.say("showing all statuses")
	}
	m.applyFilter()
}

func (m *Model) jumpToInput() {
	n := len(m.list.visible)
	for step := 1; step <= n; step++ {
		i := (m.cursor + step) % n
		if m.list.visible[i].waits {
			m.cursor = i
			m.clampCursor()
			return
		}
	}
	m.say("no task waits for input here")
}

func (m *Model) openDetail() tea.Cmd {
	t := m.selected()
	if t == nil {
		return nil
	}
	m.detail = newDetailPane(t.ID)
	m.detail.SetSize(m.detailSize())
	m.detail.vp.SetContent(m.detailText(t))
	return nil
}

// detailSize is the space of the detail pane: the screen but the count
// line and the footer.
func (m *Model) detailSize() (width, height int) {
	return m.width, max(m.height-headerLines+1-footerLines, 3)
}

// openAnswer opens the form for a task's next unanswered input request.
func (m *Model) openAnswer(t *model.Task) tea.Cmd {
	if !t.WaitsForInput() {
		m.say("task " + t.ID + " is not waiting for input")
		return nil
	}
	key := t.PendingInputs()[0]
	e, err := t.InputRequests[key].Elicitation()
	if err == nil {
		var f *form.Form
		if f, err = form.ForInput(termtext.Line(t.Tool)+" · input "+termtext.Line(key), e); err == nil {
			return m.openForm(f, formTarget{taskID: t.ID, key: key})
		}
	}
	return m.fail(fmt.Errorf("input %s of task %s cannot be answered here: %v; answer it with: taskdeck answer %s %s RESPONSE_JSON (taskdeck get %s shows an example)",
		termtext.Line(key), t.ID, err, t.ID, termtext.Line(key), t.ID))
}

func (m *Model) openForm(f *form.Form, target formTarget) tea.Cmd {
	f.SetSize(m.width-4, m.height-6)
	m.form = &formPane{form: f, target: target}
	return f.Init()
}

// updateForm routes a message to the open form and acts on its outcome.
func (m *Model) updateForm(msg tea.Msg) tea.Cmd {
	out, cmd := m.form.Update(msg, m.keys)
	switch {
	case out.refuse:
		m.askRefuse()
		return nil
	case out.done:
		return m.finishForm(out.result)
	}
	return cmd
}

// finishForm closes the form and does what its outcome says: nothing for
// Back, else the call or the answer.
func (m *Model) finishForm(res form.Result) tea.Cmd {
	target := m.form.target
	m.form = nil
	c := target.call
	switch {
	case res.Action == form.Back && c != nil:
		m.say("new call abandoned: nothing sent")
		return nil
	case res.Action == form.Back:
		m.say("input left unanswered: nothing sent (a answers it)")
		return nil
	case c != nil && target.callKey == "":
		c.args = res.JSON()
		m.say("launching " + c.tool + " on " + c.server + "…")
		return call(m.ctx, m.tracker, c)
	}
	raw, err := answerJSON(res)
	if err != nil {
		return m.fail(err)
	}
	if c == nil {
		verb := map[form.Action]string{form.Accept: "answered", form.Decline: "declined input " + target.key + " of", form.Cancel: "cancelled input " + target.key + " of"}[res.Action]
		return answer(m.ctx, m.tracker, target.taskID, target.key, raw, termtext.Line(verb))
	}
	c.answers[target.callKey] = raw
	delete(c.asks, target.callKey)
	if len(c.asks) > 0 {
		return m.askBeforeCall(c)
	}
	m.say("launching " + c.tool + " on " + c.server + " with the answers…")
	return call(m.ctx, m.tracker, c)
}

// askRefuse asks whether to decline or cancel the open form's input
// request; No returns to the form.
func (m *Model) askRefuse() {
	target := m.form.target
	what := "input " + termtext.Line(target.key) + " of task " + target.taskID
	if c := target.call; c != nil {
		what = "the question " + termtext.Line(c.tool) + " asks before it starts"
	}
	m.question = &question{
		text:    "Decline or cancel " + what + "? The server is told, and will not ask again.",
		choices: []choice{{"Decline", actDecline}, {"Cancel the request", actCancelInput}},
	}
}

// answerJSON is the input response a form's outcome stands for.
func answerJSON(res form.Result) (json.RawMessage, error) {
	resp := map[string]any{"action": res.Action}
	if res.Action == form.Accept && res.Content != nil {
		resp["content"] = res.Content
	}
	return json.Marshal(resp)
}

// askBeforeCall opens the form for the next input request a server made
// before starting a new call's task.
func (m *Model) askBeforeCall(c *newCall) tea.Cmd {
	key := slices.Sorted(maps.Keys(c.asks))[0]
	e, err := c.asks[key].Elicitation()
	if err != nil {
		return m.fail(fmt.Errorf("%s on %s asks for input %s, which the dashboard cannot show: %v", c.tool, c.server, termtext.Line(key), err))
	}
	f, err := form.ForInput(termtext.Line(c.tool)+" · before it starts · "+termtext.Line(key), e)
	if err != nil {
		return m.fail(fmt.Errorf("%s on %s asks for input %s, which the dashboard cannot show: %v; use taskdeck call --input", c.tool, c.server, termtext.Line(key), err))
	}
	return m.openForm(f, formTarget{call: c, callKey: key})
}

func (m *Model) askCancel() tea.Cmd {
	var open []*model.Task
	for _, t := range m.targets() {
		if t.Status.Pollable() {
			open = append(open, t)
		}
	}
	if len(open) == 0 {
		m.say("nothing to cancel: only working or waiting tasks can be cancelled")
		return nil
	}
	m.ask(fmt.Sprintf("Cancel %s on the server?", present.Count(len(open), "task")), open, choice{"Yes, cancel", actCancel})
	return nil
}

func (m *Model) askForget() tea.Cmd {
	targets := m.targets()
	if len(targets) == 0 {
		return nil
	}
	open := 0
	for _, t := range targets {
		if !t.Status.Terminal() {
			open++
		}
	}
	q := fmt.Sprintf("Forget %s? The local record is deleted; the server is not told.", present.Count(len(targets), "task"))
	if open > 0 {
		q += fmt.Sprintf(" %d of them may still run, and their handles will be lost.", open)
	}
	m.ask(q, targets, choice{"Yes, forget", actForget})
	return nil
}

func (m *Model) askPrune() tea.Cmd {
	n := 0
	for st, c := range m.list.counts {
		if st.Terminal() {
			n += c
		}
	}
	if n == 0 {
		m.say("nothing to prune: no finished tasks")
		return nil
	}
	m.ask(fmt.Sprintf("Prune %s (completed, failed, cancelled, unknown)?", present.Count(n, "finished task")), nil, choice{"Yes, prune", actPrune})
	return nil
}

// ask puts a question over the table, listing the tasks it acts on.
func (m *Model) ask(q string, tasks []*model.Task, yes choice) {
	c := &question{text: q, choices: []choice{yes}}
	for _, t := range tasks {
		c.ids = append(c.ids, t.ID)
		c.targets = append(c.targets, strings.Join([]string{t.ID, fit(lookOf(t).Symbol+" "+string(t.Status), 16),
			fit(termtext.Line(t.Tool), 14), termtext.Line(t.Server.String())}, "  "))
	}
	m.question = c
}

// quit quits, after asking when open tasks of stdio servers would die
// with the process (their servers are its children).
func (m *Model) quit() tea.Cmd {
	stdio := map[model.ServerRef]bool{}
	var names []string
	n := 0
	for _, r := range m.list.all {
		t := r.task
		if !t.Status.Pollable() {
			continue // only working and waiting tasks still live on their server
		}
		is, seen := stdio[t.Server]
		if !seen {
			cfg, err := m.tracker.Pool().Resolve(t.Server)
			is = err == nil && cfg.Command != ""
			stdio[t.Server] = is
			if is {
				names = append(names, termtext.Line(t.Server.String()))
			}
		}
		if is {
			n++
		}
	}
	if n == 0 {
		return tea.Quit
	}
	m.question = &question{
		text: fmt.Sprintf("Quit? %s on stdio servers (%s) will die: those servers stop with taskdeck, and the tasks become unknown.",
			present.Count(n, "open task"), strings.Join(names, ", ")),
		choices: []choice{{"Yes, quit", actQuit}},
	}
	return nil
}

func (m *Model) startNewCall() tea.Cmd {
	if len(m.opts.Servers) == 0 {
		m.say("no servers configured: add them under mcpServers in the config file")
		return nil
	}
	m.servers = &picker[string]{title: "New call: choose a server", items: m.opts.Servers, values: m.opts.Servers}
	return nil
}

// listTools starts listing a server's tools for a new call; the tool
// picker opens when they come.
func (m *Model) listTools(server string) tea.Cmd {
	m.endListing()
	m.listings++
	ctx, cancel := context.WithTimeout(m.ctx, m.opts.ListTimeout)
	m.listing = &listing{server: server, gen: m.listings, cancel: cancel}
	m.say("listing tools of " + server + "… (esc stops)")
	return listTools(ctx, m.tracker, server, m.listings)
}

// endListing stops the tools listing in flight, if any.
func (m *Model) endListing() {
	if m.listing != nil {
		m.listing.cancel()
		m.listing = nil
	}
}

func (m *Model) copyResult() tea.Cmd {
	t := m.selected()
	if t == nil || len(t.Result) == 0 {
		m.say("the selected task has no result to copy")
		return nil
	}
	m.say(fmt.Sprintf("copied the result of %s (%d bytes) to the clipboard", t.ID, len(t.Result)))
	return tea.SetClipboard(string(t.Result))
}

// targets are the marked tasks on screen, or else the selected one:
// a mark the filter hides is never acted on.
func (m *Model) targets() []*model.Task {
	var out []*model.Task
	for _, id := range slices.Sorted(maps.Keys(m.marked)) {
		if t, ok := m.list.Get(id); ok && m.list.IndexOf(id) >= 0 {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		if t := m.selected(); t != nil {
			out = append(out, t)
		}
	}
	return out
}

func (m *Model) selected() *model.Task {
	if m.detail != nil {
		if t, ok := m.list.Get(m.detail.id); ok {
			return t
		}
	}
	if m.cursor < 0 || m.cursor >= len(m.list.visible) {
		return nil
	}
	return m.list.visible[m.cursor].task
}

func (m *Model) selectedID() string {
	if t := m.selected(); t != nil {
		return t.ID
	}
	return ""
}

func (m *Model) moveCursor(d int) {
	m.cursor += d
	m.clampCursor()
}

// clampCursor keeps the cursor on a row and the row on screen.
func (m *Model) clampCursor() {
	n := len(m.list.visible)
	m.cursor = max(min(m.cursor, n-1), 0)
	h := m.tableHeight()
	if m.cursor < m.top {
		m.top = m.cursor
	}
	if m.cursor >= m.top+h {
		m.top = m.cursor - h + 1
	}
	m.top = max(min(m.top, n-h), 0)
}

func (m *Model) say(s string) { m.flash, m.flashErr, m.flashAt = s, false, m.now }

func (m *Model) fail(err error) tea.Cmd {
	m.flash, m.flashErr, m.flashAt = termtext.Line(err.Error()), true, m.now
	return nil
}
