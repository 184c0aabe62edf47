package taskdeck

import (
	"context"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

var _ deck.Deadliner = (*Deck)(nil)

// SetDeadline implements deck.Deadliner through the deck that serves:
// the engine in process, or the owner's socket.
func (d *Deck) SetDeadline(ctx context.Context, id string, at time.Time) (*model.Task, error) {
	dd, ok := d.Deck.(deck.Deadliner)
	if !ok {
		return nil, deck.Errorf(deck.KindFailed, "the taskdeck that owns the store cannot set deadlines; restart it with this version")
	}
	return dd.SetDeadline(ctx, id, at)
}
