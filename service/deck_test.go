package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store"
)

// storeDeck is a minimal deck.Deck over a real store, for testing the
// service until the engine lands: it makes records, not calls.
type storeDeck struct {
	st  *store.Store
	log *revLog
	// hold, when set, blocks Call until it is closed (a request in flight);
	// entered gets a value as each Call starts, and inFlight counts them.
	hold     chan struct{}
	entered  chan struct{}
	inFlight sync.WaitGroup
}

// revLog is the store-wide revision and its change log. The engine keeps
// it in the store; here two owners in one test share it.
type revLog struct {
	mu      sync.Mutex
	changes []deck.Event // changes[i].Rev == i+1
	times   []time.Time  // when each was published, for the feed's benchmark
	wake    chan struct{}
}

func newRevLog() *revLog { return &revLog{wake: make(chan struct{})} }

func (l *revLog) add(ev deck.Event) {
	l.mu.Lock()
	ev.Rev = uint64(len(l.changes) + 1)
	l.changes = append(l.changes, ev)
	l.times = append(l.times, time.Now())
	close(l.wake)
	l.wake = make(chan struct{})
	l.mu.Unlock()
}

// at is when change rev was published.
func (l *revLog) at(rev uint64) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.times[rev-1]
}

// since returns the changes after rev, and a channel closed at the next.
func (l *revLog) since(rev uint64) ([]deck.Event, chan struct{}, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changes[min(rev, uint64(len(l.changes))):], l.wake, uint64(len(l.changes))
}

func openStoreDeck(t testing.TB, dir string, log *revLog) (*storeDeck, error) {
	st, err := store.Open(dir, nil)
	if err != nil {
		var le *store.LockedError
		if errors.As(err, &le) {
			return nil, &deck.Error{Kind: deck.KindLocked, Message: err.Error(), Err: err}
		}
		return nil, err
	}
	return &storeDeck{st: st, log: log}, nil
}

func (d *storeDeck) change(t *model.Task) {
	d.log.add(deck.Event{Kind: deck.EventChange, Entries: []deck.Entry{{Task: t}}})
}

func (d *storeDeck) Call(ctx context.Context, req deck.CallRequest) (deck.CallResult, error) {
	if err := d.CheckCall(ctx, req); err != nil {
		return deck.CallResult{}, err
	}
	d.inFlight.Add(1)
	defer d.inFlight.Done()
	if d.hold != nil {
		d.entered <- struct{}{}
		<-d.hold
	}
	t := model.NewIntent(req.Server, req.Tool, req.Args, req.Key, time.Now())
	t.Status = model.StatusWorking
	err := d.st.Create(t)
	var dup *store.DuplicateKeyError
	switch {
	case errors.As(err, &dup):
		if dup.Existing.ArgsHash != t.ArgsHash {
			return deck.CallResult{}, &deck.Error{Kind: deck.KindConflict, Message: "key " + req.Key + " names another call", TaskID: dup.Existing.ID}
		}
		return deck.CallResult{Task: dup.Existing, Reused: true}, nil
	case err != nil:
		return deck.CallResult{}, deck.Errorf(deck.KindLocal, "%w", err)
	}
	d.change(t)
	return deck.CallResult{Task: t}, nil
}

func (d *storeDeck) Continue(ctx context.Context, id string, _ map[string]json.RawMessage) (deck.CallResult, error) {
	e, err := d.Get(ctx, id)
	if err != nil {
		return deck.CallResult{}, err
	}
	return deck.CallResult{}, &deck.Error{Kind: deck.KindState, Message: "task " + id + " asks for no input before it starts", TaskID: e.Task.ID}
}

func (d *storeDeck) Answer(ctx context.Context, id string, _ map[string]json.RawMessage) (*model.Task, error) {
	e, err := d.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if e.Task.Status != model.StatusInputRequired {
		return nil, &deck.Error{Kind: deck.KindState, Message: "task " + id + " is " + string(e.Task.Status) + ", not waiting for input", TaskID: id}
	}
	return e.Task, nil
}

func (d *storeDeck) Cancel(ctx context.Context, id string) (*model.Task, error) {
	t, err := d.st.Update(id, func(t *model.Task) (bool, error) {
		if !t.Status.Pollable() {
			return false, &deck.Error{Kind: deck.KindState, Message: "task " + id + " has ended", TaskID: id}
		}
		t.Status = model.StatusCancelled
		return true, nil
	})
	if err != nil {
		return nil, storeErr(err)
	}
	d.change(t)
	return t, nil
}

func (d *storeDeck) Forget(_ context.Context, id string) error {
	if _, err := d.st.Get(id); err != nil {
		return storeErr(err)
	}
	if err := d.st.Delete(id); err != nil {
		return storeErr(err)
	}
	d.log.add(deck.Event{Kind: deck.EventChange, Deleted: []string{id}})
	return nil
}

func (d *storeDeck) Prune(_ context.Context, olderThan time.Duration) (int, error) {
	n, err := d.st.Prune(time.Now().Add(-olderThan))
	return n, storeErr(err)
}

func (d *storeDeck) PollNow(_ context.Context, ids []string) error {
	for _, id := range ids {
		if _, err := d.st.Get(id); err != nil {
			return storeErr(err)
		}
	}
	return nil
}

func (d *storeDeck) Get(_ context.Context, id string) (deck.Entry, error) {
	t, err := d.st.Get(id)
	if err != nil {
		return deck.Entry{}, storeErr(err)
	}
	return deck.Entry{Task: t, Poll: deck.PollState{Errors: 1, LastError: "slow"}}, nil
}

func (d *storeDeck) List(_ context.Context, f deck.Filter) ([]deck.Entry, error) {
	ts, err := d.st.All()
	if f.Limit > 0 {
		ts, err = d.st.Newest(f.Limit)
	}
	if err != nil {
		return nil, storeErr(err)
	}
	var es []deck.Entry
	for _, t := range ts {
		if f.Tool == "" || t.Tool == f.Tool {
			es = append(es, deck.Entry{Task: t})
		}
	}
	return es, nil
}

func (d *storeDeck) Servers(context.Context) ([]deck.Server, error) {
	return []deck.Server{{Name: "demo", Target: "http://127.0.0.1:1/mcp"}}, nil
}

func (d *storeDeck) Tools(_ context.Context, s model.ServerRef, _ bool) (*deck.ToolList, error) {
	if s.Name != "demo" {
		return nil, deck.Errorf(deck.KindUsage, "no server %q is configured; see `taskdeck servers`", s.Name)
	}
	return &deck.ToolList{Server: "demo", SupportsTasks: true, Tools: []deck.Tool{{Name: "sleep", Raw: json.RawMessage(`{"name":"sleep"}`)}}}, nil
}

func (d *storeDeck) CheckCall(_ context.Context, req deck.CallRequest) error {
	if req.Tool != "sleep" {
		return deck.Errorf(deck.KindUsage, "server demo has no tool %q; see `taskdeck tools demo`", req.Tool)
	}
	return nil
}

// Watch: a snapshot from 0, else the changes after from, then live.
func (d *storeDeck) Watch(ctx context.Context, from uint64) (deck.Feed, error) {
	f := &testFeed{ch: make(chan deck.Event)}
	changes, wake, rev := d.log.since(from)
	var first []deck.Event
	if from == 0 {
		ts, err := d.st.All()
		if err != nil {
			return nil, storeErr(err)
		}
		snap := deck.Event{Kind: deck.EventSnapshot, Rev: rev}
		for _, t := range ts {
			snap.Entries = append(snap.Entries, deck.Entry{Task: t})
		}
		first = []deck.Event{snap}
	} else {
		first = append(slices.Clone(changes), deck.Event{Kind: deck.EventCaughtUp, Rev: rev})
	}
	go func() {
		defer close(f.ch)
		send := func(evs []deck.Event) bool {
			for _, ev := range evs {
				select {
				case f.ch <- ev:
				case <-ctx.Done():
					return false
				}
			}
			return true
		}
		if !send(first) {
			return
		}
		for {
			select {
			case <-wake:
			case <-ctx.Done():
				return
			}
			var next []deck.Event
			next, wake, _ = d.log.since(rev)
			rev += uint64(len(next))
			if !send(next) {
				return
			}
		}
	}()
	return f, nil
}

func (d *storeDeck) Close() error { return d.st.Close() }

type testFeed struct{ ch chan deck.Event }

func (f *testFeed) Events() <-chan deck.Event { return f.ch }
func (f *testFeed) Err() error                { return nil }

func storeErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return deck.Errorf(deck.KindNotFound, "%w; see `taskdeck ls`", err)
	case deck.KindOf(err) != deck.KindFailed:
		return err
	}
	return deck.Errorf(deck.KindLocal, "%w", err)
}

// sameJSON reports whether two values encode alike: what crossed the
// socket is what the deck returned.
func sameJSON(t *testing.T, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Fatalf("over the socket:\n%s\nin process:\n%s", g, w)
	}
}
