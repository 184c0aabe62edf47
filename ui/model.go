// Package ui is taskdeck's dashboard: one Bubble Tea root model that
// shows every task live and acts on it by keypress. It sees taskdeck
// through a deck.Deck alone: its rows come from the deck's feed, and every
// action is a Deck command (commands.go). Update only changes state.
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
	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/present"
	"github.com/taskdeck/taskdeck/termtext"
	"github.com/taskdeck/taskdeck/ui/form"
)

// Options configure the dashboard.
type Options struct {
	// Deck is taskdeck: in process, or through the owner's socket.
	Deck deck.Deck
	// Notify sends the desktop-notification escape (OSC 9) besides the
	// bell when a task starts waiting for input.
	Notify bool
	// Desktop makes the escape of a desktop notification of a text
	// (termtext.DesktopNotification), sent with the bell for a task whose
	// row asks to be told of its changes (notifyme.go); nil: the bell only.
	Desktop func(text string) string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Greeting is shown in the status line at start.
	Greeting string
	// Recent is how many of the newest finished tasks are read in the
	// background once the first frame is drawn (every open task is);
	// older ones are read a page at a time as the cursor reaches the last
	// row. 20,000 when zero.
	Recent int
	// ListTimeout bounds listing a server's tools for a new call; 30 s
	// (the command line's request timeout) when zero.
	ListTimeout time.Duration
	// Config is the config file's "dashboard" section (keys, colours,
	// mouse); DefaultConfig when nil.
	Config *Config
	// SearchHistory is the file the filter's searches are kept in; in
	// memory only when empty.
	SearchHistory string
	// ReadOnly is a viewer's dashboard: it lists, watches and reads; an
	// action key says why it does nothing, and the palette leaves the
	// actions out.
	ReadOnly bool
	// Notices are lines for the status line from outside the feed: that
	// taskdeck serve took the store over, and the dashboard goes on
	// through it. Nil: none.
	Notices <-chan string
}

// noticeMsg is one of Options.Notices.
type noticeMsg string

// nextNotice waits for the next of Options.Notices.
func (m *Model) nextNotice() tea.Cmd {
	if m.opts.Notices == nil {
		return nil
	}
	return func() tea.Msg {
		select {
		case <-m.ctx.Done():
			return nil
		case s := <-m.opts.Notices:
			return noticeMsg(s)
		}
	}
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
	modePalette
	modeServers
	modeDeadline
)

// Model is the dashboard's root model.
type Model struct {
	ctx    context.Context
	deck   deck.Deck
	feed   *watcher
	opts   Options
	keys   KeyMap
	styles Styles
	help   help.Model

	width, height int

	list   *taskList
	cursor int
	top    int
	marked map[string]bool
	// notifyMe are the tasks whose next change of status rings the bell
	// with a desktop notification (notifyme.go).
	notifyMe map[string]bool
	anchor   string   // where a range mark starts: the last task marked with space
	bulk     *bulkJob // the bulk action running, for its progress line
	marks    marksCount
	// selectNext is a task just made (a re-run) that the cursor goes to
	// once its row is shown.
	selectNext string
	// polls is the engine's poll state of each task, as the feed says.
	polls map[string]deck.PollState
	// configured are the servers of the config: n offers them, and quit
	// asks first when tasks of the stdio ones would die.
	configured []deck.Server
	// notify is the event endpoints as last listed with the servers.
	notify []deck.NotifyEndpoint
	// listingServers: a Servers request is out; the tick sends no other.
	listingServers bool

	loaded    bool            // the feed's snapshot is in
	hidden    int             // finished records of the store not held (window.go)
	pages     pager           // reads them a page at a time
	filling   *filling        // the snapshot's parts still coming (window.go)
	reconcile *deck.Reconcile // the start-up reconcile while it runs
	storeDown *deck.Store     // the database's loss while it lasts
	frames    int             // batches of the feed applied

	// The views (groups.go, servers.go, timefmt.go): times shown as
	// clock times, the overdue polls per server and the open tasks about
	// to expire (counted on the tick), and whether polls began or
	// stopped failing in this batch.
	absTimes       bool
	behind, pushed map[string]int
	// noEngine and watchers are, per server, its open tasks no engine
	// can poll and the engines that poll them (the servers view).
	noEngine     map[string]int
	watchers     map[string]map[string]int
	ticks        int
	expiring     int
	failingMoved bool

	filter       textinput.Model
	history      *searchHistory
	mouse        bool
	filtering    bool // the filter prompt takes the keys
	statusFilter model.Status
	helpOpen     bool
	helpTop      int // the help's first line shown: it scrolls where the screen is short
	// The overlays, nil when closed. Where several are open (a question
	// asked from a form, a tool list that came while a form was open),
	// mode says which one takes the keys.
	detail     *detailPane
	serverPick *picker[string]     // a new call's server
	toolPick   *picker[toolChoice] // a new call's tool
	form       *formPane
	question   *question
	palette    *palette
	deadline   *deadlineAsk // D's prompt, over the table or the detail pane
	listing    *listing
	servers    *serversPane
	// backToServers: the server shown alone was chosen in the servers
	// view, where esc goes back.
	backToServers bool

	// The status line: flash answers the last key (or its outcome);
	// notices say what happened meanwhile unasked, after it, so that a
	// report coming in just after a key does not wipe out its answer.
	flash    string
	flashErr bool
	flashAt  time.Time
	notices  []notice
	now      time.Time
	listings int // numbers the tools listings, so an abandoned one is dropped
}

// New builds the dashboard. ctx bounds every command it starts and the
// feed it watches.
func New(ctx context.Context, opts Options) *Model {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Recent <= 0 {
		opts.Recent = 20_000
	}
	if opts.ListTimeout <= 0 {
		opts.ListTimeout = 30 * time.Second
	}
	if opts.Config == nil {
		opts.Config = DefaultConfig()
	}
	fi := textinput.New()
	fi.Prompt = "/"
	fi.Placeholder = "words, tool:X server:X status:X args:X, -word excludes"
	m := &Model{
		ctx: ctx, deck: opts.Deck, feed: newWatcher(ctx, opts.Deck, deck.Window{Finished: min(opts.Recent, pageSize)}), opts: opts,
		keys: opts.Config.keys, styles: opts.Config.styles, mouse: opts.Config.mouse, help: help.New(),
		width: 80, height: 24,
		list: newTaskList(), marked: map[string]bool{}, notifyMe: map[string]bool{}, polls: map[string]deck.PollState{}, behind: map[string]int{}, pushed: map[string]int{},
		noEngine: map[string]int{}, watchers: map[string]map[string]int{},
		filter: fi, now: opts.Now(),
	}
	// Two spaces between the help's columns leave room at 80 columns for
	// keys the config file rebinds (bubbles drops a column that does not fit).
	m.help.FullSeparator = "  "
	m.say(opts.Greeting)
	var err error
	if m.history, err = loadHistory(opts.SearchHistory); err != nil {
		m.fail(err)
	}
	return m
}

// Init watches the feed (the snapshot, then every change), lists the
// configured servers and starts the clock.
func (m *Model) Init() tea.Cmd {
	m.feed.start()
	m.listingServers = true
	return tea.Batch(m.feed.next(), listServers(m.ctx, m.deck), tick(), m.nextNotice())
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
	case noticeMsg:
		m.tell(string(msg))
		return m, m.nextNotice()
	case feedMsg:
		cmd := m.onFeed(msg)
		return m, tea.Batch(cmd, m.feed.next(), m.nextPage())
	case pageMsg:
		return m, m.onPage(msg)
	case serversMsg:
		m.listingServers = false
		if msg.err != nil {
			return m, m.fail(msg.err)
		}
		m.onServers(msg.servers)
		m.notify = msg.notify
		return m, nil
	case tickMsg:
		m.now = time.Time(msg)
		m.tickDetail()
		views := m.onTickViews()
		// A tools listing in flight keeps its line until it ends.
		if m.flash != "" && m.listing == nil && m.now.Sub(m.flashAt) >= flashFor {
			m.flash, m.flashErr = "", false
		}
		m.notices = slices.DeleteFunc(m.notices, func(n notice) bool { return m.now.Sub(n.at) >= flashFor })
		return m, tea.Batch(tick(), views)
	case taskUpdatedMsg:
		return m, m.onTaskUpdated(msg)
	case bulkTickMsg, bulkDoneMsg:
		return m, m.onBulk(msg)
	case tea.MouseClickMsg, tea.MouseWheelMsg:
		m.onMouse(msg.(tea.MouseMsg))
		return m, m.nextPage()
	case prunedMsg:
		if msg.err != nil {
			return m, m.fail(msg.err)
		}
		m.say("pruned " + present.Count(msg.n, "finished task"))
		return m, nil
	case polledNowMsg:
		if msg.err != nil {
			return m, m.fail(msg.err)
		}
		m.say(fmt.Sprintf("polling %s now", present.Count(msg.n, "task")))
		return m, nil
	case reconciledMsg:
		return m, m.onReconciled(msg)
	case deadlineSetMsg:
		return m, m.onDeadlineSet(msg)
	case toolsMsg:
		return m, m.onTools(msg)
	case tea.KeyPressMsg:
		return m, tea.Batch(m.onKey(msg), m.nextPage())
	}
	// What the open form's and the filter prompt's own commands return.
	if m.mode() == modeForm {
		return m, m.updateForm(msg)
	}
	if m.mode() == modeDeadline {
		var cmd tea.Cmd
		m.deadline.input, cmd = m.deadline.input.Update(msg)
		return m, cmd
	}
	if m.mode() == modeFilter {
		var cmd tea.Cmd
		m.filter, cmd = m.filter.Update(msg)
		return m, cmd
	}
	return m, nil
}

// onFeed applies one frame's events: the records that changed (the last
// version of each), those deleted, poll states, the reconcile's progress.
// The table is sorted once for the batch, however many events it holds.
func (m *Model) onFeed(msg feedMsg) tea.Cmd {
	if len(msg.events) > 0 {
		m.frames++
	}
	b := batch{changed: map[string]*model.Task{}, deleted: map[string]bool{}, fresh: map[string]bool{}}
	selected, line := m.selectedID(), m.cursor-m.top
	for _, ev := range msg.events {
		switch ev.Kind {
		case deck.EventSnapshot:
			m.loadSnapshot(ev)
			b.clear()
		case deck.EventSnapshotMore:
			m.loadPart(ev)
		case deck.EventChange:
			for _, e := range ev.Entries {
				if _, known := m.list.Get(e.Task.ID); !known && !b.fresh[e.Task.ID] && ev.Prev.Terminal() {
					m.unheld(ev.Prev) // one of the store's older pages
				}
				b.changed[e.Task.ID], b.fresh[e.Task.ID] = e.Task, true
				m.setPoll(e.Task, e.Poll)
			}
			for _, id := range ev.Deleted {
				if _, known := m.list.Get(id); !known && !b.fresh[id] {
					m.unheld(ev.Prev) // one of the store's older pages
				}
				if m.pages.deleted != nil {
					m.pages.deleted[id] = true
				}
				delete(b.changed, id)
				b.deleted[id] = true
			}
		case deck.EventCaughtUp:
			if ev.Counts != nil { // as of the replay's end: what it brought first
				m.applyBatch(&b)
				m.setCounts(ev.Counts)
			}
		case deck.EventPoll:
			for _, e := range ev.Entries {
				m.setPoll(e.Task, e.Poll)
			}
		case deck.EventReconcile:
			m.onReconcile(*ev.Reconcile)
		case deck.EventStore:
			m.onStore(*ev.Store)
		}
	}
	m.applyBatch(&b)
	m.sumHidden()
	m.afterPolls()
	if i := m.list.IndexOf(selected); selected != "" && i >= 0 {
		m.cursor, m.top = i, i-line // the selected task stays on its line
	}
	m.clampCursor()
	m.selectNew()
	if m.detail != nil { // its record or its poll state may have moved
		if t, ok := m.list.Get(m.detail.id); ok {
			m.detail.vp.SetContent(m.detailText(t))
		}
	}
	var cmd tea.Cmd
	if len(b.alerts) > 0 {
		cmd = m.alert(b.alerts[len(b.alerts)-1])
	}
	if len(b.moved) > 0 {
		cmd = tea.Batch(cmd, m.notifyMoved(b.moved))
	}
	if e := msg.ended; e != nil {
		m.warn(fmt.Errorf("the feed of changes ended (%v): watching again in %v", e.err, e.retry))
	}
	return cmd
}

// batch is what a frame's events changed, not yet in the list.
type batch struct {
	changed map[string]*model.Task
	deleted map[string]bool
	fresh   map[string]bool // records this batch brought, deleted or not
	alerts  []*model.Task
	moved   []movedTask // tasks of notifyMe whose status changed
}

func (b *batch) clear() {
	clear(b.changed)
	clear(b.deleted)
	clear(b.fresh)
}

// applyBatch puts a batch's changes in the list, and notes the tasks that
// began to wait for input.
func (m *Model) applyBatch(b *batch) {
	var upserts []*model.Task
	for _, t := range b.changed {
		old, known := m.list.Get(t.ID)
		if (!known || old.Status != model.StatusInputRequired) && t.WaitsForInput() {
			b.alerts = append(b.alerts, t)
		}
		if known && m.notifyMe[t.ID] && old.Status != t.Status {
			b.moved = append(b.moved, movedTask{t, old.Status})
		}
		upserts = append(upserts, t)
	}
	var gone []string
	for id := range b.deleted {
		gone = append(gone, id)
		delete(m.marked, id)
		delete(m.notifyMe, id)
		delete(m.polls, id)
	}
	m.list.Apply(upserts, gone)
	clear(b.changed)
	clear(b.deleted)
}

// loadSnapshot replaces the rows with a snapshot's records: every open
// one, and the newest finished ones up to Options.Recent. A windowed
// snapshot brings the store's counts, its first part is drawn at once and
// its other parts fill the table in (loadPart), and the finished records
// beyond it are read a page at a time (window.go).
func (m *Model) loadSnapshot(ev deck.Event) {
	m.filling = nil
	if ev.More {
		m.filling = &filling{counts: ev.Counts}
	}
	var keep, done []*model.Task
	m.clearPolls()
	for _, e := range ev.Entries {
		if e.Task.Status.Terminal() {
			done = append(done, e.Task)
			continue
		}
		keep = append(keep, e.Task)
		m.setPoll(e.Task, e.Poll)
	}
	// Ids sort by creation: the newest finished records first.
	slices.SortFunc(done, func(a, b *model.Task) int { return strings.Compare(b.ID, a.ID) })
	shown := min(len(done), m.opts.Recent)
	keep = append(keep, done[:shown]...)
	selected := m.selectedID()
	m.list.Replace(keep)
	if ev.Counts != nil {
		m.setCounts(ev.Counts)
	} else {
		clear(m.list.extra)
		for _, t := range done[shown:] {
			m.list.extra[t.Status]++
		}
	}
	oldest := ""
	if shown > 0 {
		oldest = done[shown-1].ID
	}
	m.resetWindow(oldest)
	m.keepSelected(selected)
	m.loaded = true
	if m.filling == nil {
		m.snapshotIn()
	}
	m.refreshHealth()
}

// snapshotIn is the snapshot whole: the marks of tasks it no longer
// holds go.
func (m *Model) snapshotIn() {
	for id := range m.marked {
		if _, ok := m.list.Get(id); !ok {
			delete(m.marked, id)
		}
	}
}

// onReconcile shows the start-up reconcile's progress while it runs, and
// its report when it is over.
// onStore takes the database's loss (the header says it) or its return.
func (m *Model) onStore(st deck.Store) {
	if st.Up {
		if m.storeDown != nil {
			m.tell("the database is back; polling resumes")
		}
		m.storeDown = nil
		return
	}
	m.storeDown = &st
}

func (m *Model) onReconcile(r deck.Reconcile) {
	if !r.Over {
		m.reconcile = &r
		return
	}
	m.reconcile = nil
	m.tell(present.Reconciled(r))
}

// alert rings the bell (and notifies the desktop where asked) when a
// task starts waiting for input.
func (m *Model) alert(t *model.Task) tea.Cmd {
	// The keys first: at 80 columns the line's end is cut.
	hint := termtext.Line(t.Tool) + " waits for input: press i then a (2: inbox)"
	if t.Agent != "" {
		hint = "agent " + termtext.Line(t.Agent) + " waits on you (" + termtext.Line(t.Tool) + "): press i then a"
	}
	m.tell(hint + " · task " + m.list.shortID(t.ID))
	out := "\a"
	if m.opts.Notify && m.opts.Desktop != nil {
		out += m.opts.Desktop("taskdeck: " + t.Tool + " waits for input")
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

// onTaskUpdated words an action's outcome; the rows follow from the feed.
// A call or an answer that leaves questions open asks the next one.
func (m *Model) onTaskUpdated(msg taskUpdatedMsg) tea.Cmd {
	if msg.err != nil {
		return m.fail(msg.err)
	}
	if msg.needsInput {
		if len(msg.again) > 0 {
			m.fail(fmt.Errorf("%s asks again for %s: the server did not take the answer", termtext.Line(msg.task.Tool), termtext.Line(strings.Join(msg.again, ", "))))
		}
		return m.openAnswer(msg.task)
	}
	m.say(fmt.Sprintf("%s: task %s", msg.words(), msg.task.ID))
	if msg.act == actAnswered && len(msg.task.PendingInputs()) > 0 {
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
	m.toolPick = p
	return nil
}

// toolChoice is one item of the tool picker.
type toolChoice struct {
	server string
	tool   deck.Tool
}

// mode tells what takes the keys: the question over everything, else
// the overlay that is open, else the table.
func (m *Model) mode() mode {
	switch {
	case m.question != nil:
		return modeConfirm
	case m.form != nil:
		return modeForm
	case m.serverPick != nil || m.toolPick != nil:
		return modePick
	case m.palette != nil:
		return modePalette
	case m.deadline != nil:
		return modeDeadline
	case m.helpOpen:
		return modeHelp
	case m.servers != nil:
		return modeServers
	case m.detail != nil:
		return modeDetail
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
	case modePalette:
		return m.keyPalette(msg)
	case modeServers:
		return m.keyServers(msg)
	case modeDeadline:
		return m.keyDeadline(msg)
	case modeDetail:
		out, cmd := m.detail.Update(msg, m.keys)
		switch out {
		case detailClose:
			m.detail = nil
		case detailPass:
			cmd = m.keyTable(msg)
			if m.mode() != modeDetail && m.mode() != modeDeadline {
				m.detail = nil // what the key opened takes the screen (D's prompt is on the status line)
			}
		}
		return cmd
	case modeHelp:
		m.keyHelp(msg)
		return nil
	case modeFilter:
		return m.keyFilter(msg)
	}
	return m.keyTable(msg)
}

// keyTable does what a key does in the table: a group's key shows its
// group, any other runs the action it is bound to.
func (m *Model) keyTable(msg tea.KeyPressMsg) tea.Cmd {
	if m.refused(msg) {
		return nil
	}
	if key.Matches(msg, m.keys.Groups) {
		m.toggleGroup(int(msg.Code - '1'))
		return nil
	}
	for _, col := range m.keys.tableActions() {
		for _, a := range col {
			if a.do != nil && key.Matches(msg, a.b) {
				return a.do(m)
			}
		}
	}
	return nil
}

// back leaves what the table narrows to (a tools listing, marks, a filter,
// a group, a server, an agent) and goes back to the servers view if it
// came from there.
func (m *Model) back() {
	if m.listing != nil {
		m.say("stopped listing the tools of " + m.listing.server)
		m.endListing()
		return
	}
	m.clearMarks()
	back, server := m.backToServers, m.list.server
	if m.filter.Value() != "" || m.statusFilter != "" || m.list.group != nil || m.list.server != "" || m.list.agent != "" {
		m.filter.SetValue("")
		m.statusFilter = ""
		m.list.server = ""
		m.list.agent = ""
		m.list.group = nil
		m.applyFilter()
		m.say("showing every task")
	}
	if back {
		m.openServers(server)
	}
}

// pollTargets polls the open tasks among the targets.
func (m *Model) pollTargets() tea.Cmd {
	var ids []string
	for _, t := range m.targets() {
		if t.Pollable() {
			ids = append(ids, t.ID)
		}
	}
	if len(ids) == 0 {
		m.say("nothing to poll: only working or waiting tasks are polled")
		return reconcile(m.ctx, m.deck)
	}
	return tea.Batch(pollNow(m.ctx, m.deck, ids), reconcile(m.ctx, m.deck))
}

func (m *Model) keyFilter(msg tea.KeyPressMsg) tea.Cmd {
	switch {
	case key.Matches(msg, m.keys.Keep):
		m.filtering = false
		m.filter.Blur()
		if err := m.history.add(m.filter.Value()); err != nil {
			return m.fail(err)
		}
		return nil
	case key.Matches(msg, m.keys.Older, m.keys.Newer):
		d := 1
		if key.Matches(msg, m.keys.Older) {
			d = -1
		}
		m.filter.SetValue(m.history.step(d))
		m.filter.CursorEnd()
		m.applyFilter()
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
		m.clearMarks()
		return m.cancelTasks(a.ids)
	case actForget:
		m.clearMarks()
		return m.forget(a.ids)
	case actRerun:
		m.clearMarks()
		return m.rerun(a.ids)
	case actAdopt, actLeave:
		m.clearMarks()
		return m.settleFound(a.ids, a.act == actAdopt)
	case actPrune:
		return prune(m.ctx, m.deck)
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
	if p := m.serverPick; p != nil {
		out, done := p.Update(msg, m.keys)
		if !done {
			return nil
		}
		m.serverPick = nil
		if out.back {
			return nil
		}
		return m.listTools(out.value)
	}
	out, done := m.toolPick.Update(msg, m.keys)
	if !done {
		return nil
	}
	m.toolPick = nil
	if out.back {
		return nil
	}
	c := out.value
	f, err := form.ForArguments(c.server+" · "+termtext.Line(c.tool.Name), c.tool)
	if err != nil {
		return m.fail(err)
	}
	// The call goes out under the server's own name of the tool, not the shown one.
	return m.openForm(f.WithKey(), formTarget{call: &newCall{server: c.server, tool: c.tool.Name}})
}

func (m *Model) applyFilter() {
	selected := m.selectedID()
	m.list.SetFilter(m.filter.Value(), m.statusFilter)
	m.cursor = max(m.list.IndexOf(selected), 0)
	m.clampCursor()
}

func (m *Model) cycleStatusFilter() {
	if m.list.group != nil {
		m.list.setGroup(nil) // a status and a group would hide each other
	}
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
	target := formTarget{taskID: t.ID, key: key, tool: t.Tool, before: t.NeedsInput()}
	title := termtext.Line(t.Tool) + " · input " + termtext.Line(key)
	if target.before {
		title = termtext.Line(t.Tool) + " · before it starts · " + termtext.Line(key)
	}
	e, err := t.InputRequests[key].Elicitation()
	if err == nil {
		var f *form.Form
		if f, err = form.ForInput(title, e); err == nil {
			return m.openForm(f, target)
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
	case c != nil:
		c.args, c.key = res.JSON(), res.Key
		m.say("launching " + termtext.Line(c.tool) + " on " + c.server + "…")
		return call(m.ctx, m.deck, c)
	}
	raw, err := answerJSON(res)
	if err != nil {
		return m.fail(err)
	}
	act := map[form.Action]taskAct{form.Accept: actAnswered, form.Decline: actDeclined, form.Cancel: actCancelled}[res.Action]
	if target.before {
		return continueCall(m.ctx, m.deck, target.taskID, target.key, raw, act)
	}
	return answer(m.ctx, m.deck, target.taskID, target.key, raw, act)
}

// askRefuse asks whether to decline or cancel the open form's input
// request; No returns to the form.
func (m *Model) askRefuse() {
	target := m.form.target
	what := "input " + termtext.Line(target.key) + " of task " + target.taskID
	if target.before {
		what = "the question " + termtext.Line(target.tool) + " asks before it starts"
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

func (m *Model) askCancel() tea.Cmd {
	var open []*model.Task
	for _, t := range m.targets() {
		if t.Pollable() {
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
	for _, st := range model.AllStatuses {
		if st.Terminal() {
			n += m.list.stored(st)
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
	c := &question{text: q, choices: []choice{yes}, ids: make([]string, 0, len(tasks))}
	for _, t := range tasks {
		c.ids = append(c.ids, t.ID)
	}
	// Only the lines shown are made: marking all of a million tasks
	// makes a line each for nothing.
	for _, t := range tasks[:min(len(tasks), maxTargets)] {
		c.targets = append(c.targets, strings.Join([]string{t.ID, fit(lookOf(t).Symbol+" "+string(t.Status), 16),
			fit(termtext.Line(t.Tool), 14), termtext.Line(t.Server.String())}, "  "))
	}
	if n := m.hiddenMarks(); n > 0 {
		c.text += fmt.Sprintf(" (%d marked tasks the filter hides are left alone.)", n)
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
		if !t.Pollable() {
			continue // only working and waiting tasks still live on their server
		}
		is, seen := stdio[t.Server]
		if !seen {
			is = t.Server.URL == "" && slices.ContainsFunc(m.configured, func(s deck.Server) bool { return s.Name == t.Server.Name && s.Stdio })
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
	if len(m.configured) == 0 {
		m.say("no servers configured: add them under mcpServers in the config file")
		return nil
	}
	p := &picker[string]{title: "New call: choose a server"}
	for _, s := range m.configured {
		p.items, p.values = append(p.items, termtext.Line(s.Name)), append(p.values, s.Name)
		p.notes = append(p.notes, serverNote(s))
	}
	m.serverPick = p
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
	return listTools(ctx, m.deck, server, m.listings)
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

// notice is one line told on the status line unasked; err: something
// went wrong, shown as an error is.
type notice struct {
	text string
	err  bool
	at   time.Time
}

// maxNotices bounds the notices shown at once: the newest, and the one
// just before it (serve's reconcile report comes right after the notice
// that it took over).
const maxNotices = 2

// tell puts a line nobody asked for on the status line, after the
// answer to the last key; each stays flashFor.
func (m *Model) tell(s string) { m.addNotice(s, false) }

// warn tells of a failure nobody's key caused, the way tell does.
func (m *Model) warn(err error) { m.addNotice(err.Error(), true) }

func (m *Model) addNotice(s string, isErr bool) {
	m.notices = append(m.notices, notice{termtext.Line(s), isErr, m.now})
	if n := len(m.notices) - maxNotices; n > 0 {
		m.notices = slices.Delete(m.notices, 0, n)
	}
}

func (m *Model) fail(err error) tea.Cmd {
	m.flash, m.flashErr, m.flashAt = termtext.Line(err.Error()), true, m.now
	return nil
}

// refused says, on a read-only dashboard, why a key that changes records
// does nothing; it reports whether it refused the key.
func (m *Model) refused(msg tea.KeyPressMsg) bool {
	if !m.opts.ReadOnly {
		return false
	}
	for _, c := range m.keys.changes() {
		if key.Matches(msg, c.b) {
			m.fail(fmt.Errorf("read-only dashboard: a viewer cannot %s; start taskdeck without --read-only to act", c.verb))
			return true
		}
	}
	return false
}
