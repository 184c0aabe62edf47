package deck_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/taskdeck/taskdeck/deck"
)

// script is a feed that delivers its events, then ends with err.
type script struct {
	ch  chan deck.Event
	err error
}

func (s *script) Events() <-chan deck.Event { return s.ch }
func (s *script) Err() error                { return s.err }

func feedOf(err error, evs ...deck.Event) *script {
	s := &script{ch: make(chan deck.Event, len(evs)), err: err}
	for _, ev := range evs {
		s.ch <- ev
	}
	close(s.ch)
	return s
}

// A followed feed resumes from the last change or whole snapshot it
// delivered (not from a snapshot's part), and ends with the error that
// resume refuses.
func TestFollowResumesFromTheLastRevisionDelivered(t *testing.T) {
	gone := deck.Errorf(deck.KindOwnerGone, "the owner went away")
	feeds := []*script{
		feedOf(gone,
			deck.Event{Kind: deck.EventSnapshot, Rev: 4},
			deck.Event{Kind: deck.EventChange, Rev: 5},
			deck.Event{Kind: deck.EventPoll, Rev: 5},
		),
		feedOf(gone,
			deck.Event{Kind: deck.EventSnapshot, Rev: 9, More: true},
		),
		feedOf(errors.New("disk on fire"),
			deck.Event{Kind: deck.EventSnapshot, Rev: 9, More: true},
			deck.Event{Kind: deck.EventSnapshotMore, Rev: 9},
		),
	}
	var froms []uint64
	watch := func(_ context.Context, from uint64) (deck.Feed, error) {
		froms = append(froms, from)
		f := feeds[0]
		feeds = feeds[1:]
		return f, nil
	}
	resume := func(_ context.Context, err error) bool { return deck.KindOf(err) == deck.KindOwnerGone }
	f, err := deck.Follow(context.Background(), 2, watch, resume)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range f.Events() {
		n++
	}
	if n != 6 {
		t.Errorf("delivered %d events, want all 6", n)
	}
	if want := []uint64{2, 5, 5}; !slices.Equal(froms, want) {
		t.Errorf("watched from %v, want %v", froms, want)
	}
	if f.Rev() != 9 || f.Err() == nil || f.Err().Error() != "disk on fire" {
		t.Errorf("ended at rev %d with %v, want 9 and the refused error", f.Rev(), f.Err())
	}
}

// Its context's end ends it without an error, unless the context was
// ended with a cause.
func TestFollowEndsWithItsContext(t *testing.T) {
	closed := errors.New("the deck is closed")
	for _, cause := range []error{nil, closed} {
		ctx, cancel := context.WithCancelCause(context.Background())
		live := &script{ch: make(chan deck.Event)}
		f, err := deck.Follow(ctx, 0, func(ctx context.Context, _ uint64) (deck.Feed, error) {
			context.AfterFunc(ctx, func() { close(live.ch) })
			return live, nil
		}, func(context.Context, error) bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		cancel(cause)
		for range f.Events() {
		}
		if !errors.Is(f.Err(), cause) || (cause == nil && f.Err() != nil) {
			t.Errorf("canceled with cause %v: Err = %v", cause, f.Err())
		}
	}
}
