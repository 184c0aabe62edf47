// Package decktest is an in-memory deck.Deck for unit tests of the
// frontends. The test adds and changes records, scripts what calls and
// actions answer, and the deck publishes every change on its feeds as the
// engine does: a snapshot (or, resumed from a revision, the changes after
// it and a caughtUp), then each change in revision order. It talks to no
// server and keeps nothing on disk; flows that need a server (polls,
// pushes, reconcile) stay on the demo server and the engine.
package decktest

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// Outcome scripts what Call does with a call of a tool. The zero Outcome
// makes a working task.
type Outcome struct {
	// Err refuses the call: Call returns it and keeps no record.
	Err error
	// Status is the record's status after the call (default working);
	// Result and IsError go on it.
	Status  model.Status
	Result  json.RawMessage
	IsError bool
	// Input: the server asks for these before any task exists; the call
	// NeedsInput until Continue answers them all.
	Input map[string]model.InputRequest
}

// Deck is an in-memory deck.Deck. Its zero value is not usable: use New.
type Deck struct {
	mu      sync.Mutex
	now     func() time.Time
	rev     uint64
	recs    map[string]*model.Task
	poll    map[string]deck.PollState
	changes []deck.Event // every change committed, for a resume
	feeds   map[*feed]struct{}
	closed  bool

	servers  []deck.Server
	tools    map[string]*deck.ToolList
	notify   []deck.NotifyEndpoint
	outcomes map[string]Outcome
	refused  map[string]error

	calls   []deck.CallRequest
	lists   []deck.Filter
	watches []uint64
	hold    chan struct{} // while open, a watch waits (Hold)
}

var (
	_ deck.Deck     = (*Deck)(nil)
	_ deck.Notifier = (*Deck)(nil)
)

// New makes an empty deck whose clock is now (nil: time.Now).
func New(now func() time.Time) *Deck {
	if now == nil {
		now = time.Now
	}
	return &Deck{
		now:      now,
		recs:     map[string]*model.Task{},
		poll:     map[string]deck.PollState{},
		feeds:    map[*feed]struct{}{},
		tools:    map[string]*deck.ToolList{},
		outcomes: map[string]Outcome{},
		refused:  map[string]error{},
	}
}

// Put adds or replaces records, each one change at the next revision
// (the deck keeps copies, their Revision set), and returns the last
// revision.
func (d *Deck) Put(tasks ...*model.Task) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, t := range tasks {
		d.commit(t.Clone())
	}
	return d.rev
}

// Delete removes records, each one change.
func (d *Deck) Delete(ids ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ids {
		d.remove(id)
	}
}

// Poll sets the poll state of a record and publishes it (EventPoll).
func (d *Deck) Poll(id string, p deck.PollState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.recs[id]
	if !ok {
		panic("decktest: Poll of a record the deck does not hold: " + id)
	}
	d.poll[id] = p
	d.publish(deck.Event{Kind: deck.EventPoll, Rev: d.rev, Entries: []deck.Entry{{Task: t, Poll: p}}})
}

// Publish hands an event that commits nothing (a reconcile's progress,
// the store lost or back) to every feed, at the current revision.
func (d *Deck) Publish(ev deck.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ev.Kind == deck.EventChange || ev.Kind == deck.EventSnapshot || ev.Kind == deck.EventSnapshotMore {
		panic("decktest: Publish carries no records: use Put or Delete")
	}
	ev.Rev = d.rev
	d.publish(ev)
}

// Hold has every Watch and WatchWindow from now on wait, once counted in
// Watches, until release is called or its context ends: a slow remote
// Deck. release may be called more than once.
func (d *Deck) Hold() (release func()) {
	hold := make(chan struct{})
	d.mu.Lock()
	d.hold = hold
	d.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			d.hold = nil
			d.mu.Unlock()
			close(hold)
		})
	}
}

// Cut ends every feed now with err, as an owner that goes away does.
func (d *Deck) Cut(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut(err)
}

// SetServers sets what Servers returns.
func (d *Deck) SetServers(servers ...deck.Server) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.servers = slices.Clone(servers)
}

// SetTools sets a server's tool list; a call of a tool it lacks is then
// refused with a usage error, as the engine refuses it.
func (d *Deck) SetTools(l deck.ToolList) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tools[l.Server] = &l
}

// SetNotify sets what NotifyStatus returns.
func (d *Deck) SetNotify(endpoints ...deck.NotifyEndpoint) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.notify = slices.Clone(endpoints)
}

// Script sets what a call of tool does from now on.
func (d *Deck) Script(tool string, o Outcome) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.outcomes[tool] = o
}

// Refuse makes every action on a record (Answer, Continue, Cancel, one of
// CancelMany, Forget, PollNow) fail with err, changing nothing.
func (d *Deck) Refuse(id string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refused[id] = err
}

// Calls are the requests Call was given, in order.
func (d *Deck) Calls() []deck.CallRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// Lists are the filters List was given, in order.
func (d *Deck) Lists() []deck.Filter {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.lists)
}

// Watches are the revisions each Watch and WatchWindow started from.
func (d *Deck) Watches() []uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.watches)
}

// commit stores t and publishes its change; the caller holds mu.
func (d *Deck) commit(t *model.Task) {
	var prev model.Status
	if old, ok := d.recs[t.ID]; ok {
		prev = old.Status
	}
	d.rev++
	t.Revision = d.rev
	d.recs[t.ID] = t
	ev := deck.Event{Kind: deck.EventChange, Rev: d.rev, Entries: []deck.Entry{d.entry(t)}}
	d.changes = append(d.changes, ev)
	ev.Prev = prev // live changes say it; a replay cannot (deck.Event.Prev)
	d.publish(ev)
}

// remove deletes a record and publishes it; the caller holds mu.
func (d *Deck) remove(id string) {
	if _, ok := d.recs[id]; !ok {
		return
	}
	prev := d.recs[id].Status
	delete(d.recs, id)
	delete(d.poll, id)
	d.rev++
	ev := deck.Event{Kind: deck.EventChange, Rev: d.rev, Deleted: []string{id}}
	d.changes = append(d.changes, ev)
	ev.Prev = prev
	d.publish(ev)
}

func (d *Deck) entry(t *model.Task) deck.Entry { return deck.Entry{Task: t, Poll: d.poll[t.ID]} }

// errClosed is what a closed deck answers.
var errClosed = &deck.Error{Kind: deck.KindOwnerGone, Message: "the deck is closed"}

// begin takes mu for an action on the deck, or says it is closed.
func (d *Deck) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return &deck.Error{Kind: deck.KindCanceled, Message: err.Error(), Err: err}
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return errClosed
	}
	return nil
}

// Call implements deck.Deck as scripted (Script): a key that names the
// same call reuses its record, one that names another call conflicts.
func (d *Deck) Call(ctx context.Context, req deck.CallRequest) (deck.CallResult, error) {
	if err := d.begin(ctx); err != nil {
		return deck.CallResult{}, err
	}
	defer d.mu.Unlock()
	d.calls = append(d.calls, req)
	name := cmp.Or(req.Server.Name, req.Server.URL)
	if l, ok := d.tools[name]; ok && !slices.ContainsFunc(l.Tools, func(t deck.Tool) bool { return t.Name == req.Tool }) {
		return deck.CallResult{}, deck.Errorf(deck.KindUsage, "server %s has no tool %q", name, req.Tool)
	}
	t := model.NewIntent(req.Server, req.Tool, req.Args, req.Key, d.now())
	if req.Key != "" {
		for _, old := range d.recs {
			if old.IdempotencyKey != req.Key {
				continue
			}
			if old.ArgsHash != t.ArgsHash {
				return deck.CallResult{}, deck.Errorf(deck.KindConflict, "key %q names another call (task %s)", req.Key, old.ID)
			}
			return deck.CallResult{Task: old, Reused: true}, nil
		}
	}
	o := d.outcomes[req.Tool]
	if o.Err != nil {
		return deck.CallResult{}, o.Err
	}
	t.Agent, t.Repeats, t.Owner, t.HandleHash = req.Agent, req.Repeats, req.Owner, req.HandleHash
	if len(o.Input) > 0 {
		t.Status, t.InputRequests = model.StatusInputRequired, maps.Clone(o.Input)
		d.commit(t)
		return deck.CallResult{Task: t, NeedsInput: true}, nil
	}
	t.TaskID, t.Status, t.Result, t.IsError = "task-"+t.ID, cmp.Or(o.Status, model.StatusWorking), o.Result, o.IsError
	d.commit(t)
	return deck.CallResult{Task: t}, nil
}

// Continue implements deck.Deck: once every request is answered the task
// starts (working).
func (d *Deck) Continue(ctx context.Context, id string, answers map[string]json.RawMessage) (deck.CallResult, error) {
	t, err := d.answer(ctx, id, answers, true)
	if err != nil {
		return deck.CallResult{}, err
	}
	return deck.CallResult{Task: t, NeedsInput: t.TaskID == ""}, nil
}

// Answer implements deck.Deck: the answered requests are kept as
// answered; once none is pending the task is working again.
func (d *Deck) Answer(ctx context.Context, id string, answers map[string]json.RawMessage) (*model.Task, error) {
	return d.answer(ctx, id, answers, false)
}

func (d *Deck) answer(ctx context.Context, id string, answers map[string]json.RawMessage, starting bool) (*model.Task, error) {
	t, err := d.act(ctx, id)
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	if t.Status != model.StatusInputRequired || (starting && t.TaskID != "") {
		return nil, deck.Errorf(deck.KindState, "task %s is %s: it asks for nothing", t.ID, t.Status)
	}
	for k := range answers {
		if _, asked := t.InputRequests[k]; !asked {
			return nil, deck.Errorf(deck.KindUsage, "task %s asks for no %q", t.ID, k)
		}
	}
	t = t.Clone()
	for _, k := range slices.Sorted(maps.Keys(answers)) {
		if !t.Answered(k) {
			t.AnsweredKeys = append(t.AnsweredKeys, k)
		}
	}
	if len(t.PendingInputs()) == 0 {
		t.Status, t.TaskID, t.UpdatedAt = model.StatusWorking, cmp.Or(t.TaskID, "task-"+t.ID), d.now()
	}
	d.commit(t)
	return t, nil
}

// act finds the record of an action and holds mu, unless it is refused.
func (d *Deck) act(ctx context.Context, id string) (*model.Task, error) {
	if err := d.begin(ctx); err != nil {
		return nil, err
	}
	t, err := d.find(id)
	if err == nil {
		err = d.refused[t.ID]
	}
	if err != nil {
		d.mu.Unlock()
		return nil, err
	}
	return t, nil
}

// Cancel implements deck.Deck: an open task is cancelled at once.
func (d *Deck) Cancel(ctx context.Context, id string) (*model.Task, error) {
	t, err := d.act(ctx, id)
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	return d.cancel(t)
}

func (d *Deck) cancel(t *model.Task) (*model.Task, error) {
	if !t.Status.Pollable() {
		return nil, deck.Errorf(deck.KindState, "task %s is %s: there is nothing to cancel", t.ID, t.Status)
	}
	t = t.Clone()
	t.Status, t.UpdatedAt = model.StatusCancelled, d.now()
	d.commit(t)
	return t, nil
}

// Reconcile implements deck.Deck: the in-memory Deck has no server to
// list, so nothing is adopted or found.
func (d *Deck) Reconcile(ctx context.Context) (deck.Reconciled, error) {
	if err := d.begin(ctx); err != nil {
		return deck.Reconciled{}, err
	}
	d.mu.Unlock()
	return deck.Reconciled{}, nil
}

// SettleFound implements deck.Deck: a found record is adopted (working)
// or left.
func (d *Deck) SettleFound(ctx context.Context, id string, adopt bool) (*model.Task, error) {
	t, err := d.act(ctx, id)
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	t = t.Clone()
	settle := t.LeaveFound
	if adopt {
		settle = t.AdoptFound
	}
	if err := settle(d.now()); err != nil {
		return nil, deck.Errorf(deck.KindState, "task %s is %s: only a found task is adopted or left", t.ID, t.Status)
	}
	d.commit(t)
	return t, nil
}

// CancelMany implements deck.Deck: Cancel of each.
func (d *Deck) CancelMany(ctx context.Context, ids []string) []error {
	errs := make([]error, len(ids))
	for i, id := range ids {
		_, errs[i] = d.Cancel(ctx, id)
	}
	return errs
}

// Forget implements deck.Deck.
func (d *Deck) Forget(ctx context.Context, id string) error {
	t, err := d.act(ctx, id)
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	d.remove(t.ID)
	return nil
}

// Prune implements deck.Deck.
func (d *Deck) Prune(ctx context.Context, olderThan time.Duration) (int, error) {
	if err := d.begin(ctx); err != nil {
		return 0, err
	}
	defer d.mu.Unlock()
	n := 0
	for _, id := range slices.Sorted(maps.Keys(d.recs)) {
		if t := d.recs[id]; t.Status.Terminal() && d.now().Sub(t.UpdatedAt) >= olderThan {
			d.remove(id)
			n++
		}
	}
	return n, nil
}

// PollNow implements deck.Deck: it polls nothing (there is no server);
// a refused record's error is returned.
func (d *Deck) PollNow(ctx context.Context, ids []string) error {
	for _, id := range ids {
		t, err := d.act(ctx, id)
		if err != nil {
			return err
		}
		d.mu.Unlock()
		if !t.Status.Pollable() {
			return deck.Errorf(deck.KindState, "task %s is %s: there is nothing to poll", t.ID, t.Status)
		}
	}
	return nil
}

// find is a record by id or unique prefix; the caller holds mu.
func (d *Deck) find(id string) (*model.Task, error) {
	if t, ok := d.recs[id]; ok {
		return t, nil
	}
	var found *model.Task
	for k, t := range d.recs {
		if id == "" || !strings.HasPrefix(k, id) {
			continue
		}
		if found != nil {
			return nil, deck.Errorf(deck.KindUsage, "id prefix %q names several tasks", id)
		}
		found = t
	}
	if found == nil {
		return nil, deck.Errorf(deck.KindNotFound, "no task %q", id)
	}
	return found, nil
}

// Get implements deck.Deck.
func (d *Deck) Get(ctx context.Context, id string) (deck.Entry, error) {
	if err := d.begin(ctx); err != nil {
		return deck.Entry{}, err
	}
	defer d.mu.Unlock()
	t, err := d.find(id)
	if err != nil {
		return deck.Entry{}, err
	}
	return d.entry(t), nil
}

// List implements deck.Deck, newest first.
func (d *Deck) List(ctx context.Context, f deck.Filter) ([]deck.Entry, error) {
	if err := d.begin(ctx); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	d.lists = append(d.lists, f)
	for _, g := range f.Groups {
		if _, ok := deck.GroupNamed(g); !ok {
			return nil, deck.Errorf(deck.KindUsage, "no status group %q", g)
		}
	}
	var out []deck.Entry
	for _, id := range d.newestFirst() {
		if e := d.entry(d.recs[id]); (f.Before == "" || id < f.Before) && f.Admits(e) {
			out = append(out, e)
		}
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
	}
	return out, nil
}

// newestFirst is every id, newest first (ids sort by creation).
func (d *Deck) newestFirst() []string {
	ids := slices.Sorted(maps.Keys(d.recs))
	slices.Reverse(ids)
	return ids
}

// Servers implements deck.Deck: those SetServers set (none: an empty
// list, not nil, as a config without servers lists).
func (d *Deck) Servers(ctx context.Context) ([]deck.Server, error) {
	if err := d.begin(ctx); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	return append([]deck.Server{}, d.servers...), nil
}

// Tools implements deck.Deck: the list SetTools set; a server without one
// is unreachable.
func (d *Deck) Tools(ctx context.Context, server model.ServerRef, refresh bool) (*deck.ToolList, error) {
	if err := d.begin(ctx); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	name := cmp.Or(server.Name, server.URL)
	l, ok := d.tools[name]
	if !ok {
		return nil, deck.Errorf(deck.KindUnreachable, "server %s: no tool list (decktest: SetTools sets one)", name)
	}
	out := *l
	out.Tools = slices.Clone(l.Tools)
	return &out, nil
}

// NotifyStatus implements deck.Notifier: the endpoints SetNotify set.
func (d *Deck) NotifyStatus(ctx context.Context) ([]deck.NotifyEndpoint, error) {
	if err := d.begin(ctx); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	return slices.Clone(d.notify), nil
}

// Audit implements deck.Auditor: the deck keeps no audit log.
func (d *Deck) Audit(ctx context.Context, f model.AuditFilter) (deck.AuditLog, error) {
	return deck.AuditLog{}, nil
}

// VerifyAudit implements deck.Auditor: an empty log verifies.
func (d *Deck) VerifyAudit(ctx context.Context) (model.AuditReport, error) {
	return model.AuditReport{}, nil
}

// PruneAudit implements deck.Auditor: there is nothing to prune.
func (d *Deck) PruneAudit(ctx context.Context, before time.Time) (int, error) { return 0, nil }

// Close implements deck.Deck: every feed ends as when an owner goes.
func (d *Deck) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed {
		d.closed = true
		d.cut(errClosed)
	}
	return nil
}

// Watch implements deck.Deck.
func (d *Deck) Watch(ctx context.Context, from uint64) (deck.Feed, error) {
	return d.watch(ctx, from, nil)
}

// WatchWindow implements deck.Deck; its snapshot comes in one part.
func (d *Deck) WatchWindow(ctx context.Context, from uint64, w deck.Window) (deck.Feed, error) {
	if w.Finished < 0 {
		return nil, deck.Errorf(deck.KindUsage, "a window of %d finished records: it takes 0 or more", w.Finished)
	}
	return d.watch(ctx, from, &w)
}

// watch queues what the feed starts with and subscribes it under one
// hold of mu: no change is missed or comes twice.
func (d *Deck) watch(ctx context.Context, from uint64, w *deck.Window) (deck.Feed, error) {
	d.mu.Lock()
	d.watches = append(d.watches, from)
	hold := d.hold
	d.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
		}
	}
	if err := d.begin(ctx); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	f := &feed{out: make(chan deck.Event), wake: make(chan struct{}, 1), stop: make(chan struct{})}
	if from > 0 && from <= d.rev {
		for _, ev := range d.changes {
			if ev.Rev > from {
				f.put(ev)
			}
		}
		up := deck.Event{Kind: deck.EventCaughtUp, Rev: d.rev}
		if w != nil {
			up.Counts = d.counts()
		}
		f.put(up)
	} else {
		f.put(d.snapshot(w))
		if from > 0 {
			f.put(deck.Event{Kind: deck.EventCaughtUp, Rev: d.rev})
		}
	}
	d.feeds[f] = struct{}{}
	go f.run(ctx, d)
	return f, nil
}

// snapshot is every record, or the window's: the open ones, the newest
// w.Finished others, and the counts.
func (d *Deck) snapshot(w *deck.Window) deck.Event {
	ev := deck.Event{Kind: deck.EventSnapshot, Rev: d.rev}
	finished := 0
	for _, id := range d.newestFirst() {
		t := d.recs[id]
		if w != nil && !t.Status.Pollable() {
			if finished == w.Finished {
				continue
			}
			finished++
		}
		ev.Entries = append(ev.Entries, d.entry(t))
	}
	if w != nil {
		ev.Counts = d.counts()
	}
	return ev
}

func (d *Deck) counts() map[model.Status]int {
	counts := map[model.Status]int{}
	for _, t := range d.recs {
		counts[t.Status]++
	}
	return counts
}

// publish queues ev on every feed; the caller holds mu.
func (d *Deck) publish(ev deck.Event) {
	for f := range d.feeds {
		f.put(ev)
	}
}

// cut ends every feed with err; the caller holds mu.
func (d *Deck) cut(err error) {
	for f := range d.feeds {
		f.end(err)
		delete(d.feeds, f)
	}
}

func (d *Deck) unsubscribe(f *feed) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.feeds, f)
}

// feed is one watcher's stream. Its queue has no bound: a test's feed
// is never cut for reading slowly (Cut cuts it).
type feed struct {
	out  chan deck.Event
	wake chan struct{} // holds a token while queue may hold events
	stop chan struct{} // closed by end

	mu    sync.Mutex
	queue []deck.Event
	cause error // why end was called
	err   error // why the feed ended, once out is closed
}

func (f *feed) Events() <-chan deck.Event { return f.out }
func (f *feed) Err() error                { return f.err }

func (f *feed) put(ev deck.Event) {
	f.mu.Lock()
	f.queue = append(f.queue, ev)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *feed) end(err error) {
	f.mu.Lock()
	f.cause = err
	f.mu.Unlock()
	close(f.stop)
}

func (f *feed) run(ctx context.Context, d *Deck) {
	defer close(f.out)
	defer d.unsubscribe(f)
	for {
		f.mu.Lock()
		queue := f.queue
		f.queue = nil
		f.mu.Unlock()
		for _, ev := range queue {
			select {
			case f.out <- ev:
			case <-f.stop:
				f.stopped()
				return
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-f.wake:
		case <-f.stop:
			f.stopped()
			return
		case <-ctx.Done():
			return
		}
	}
}

func (f *feed) stopped() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = f.cause
}
