package service

import (
	"context"
	"net/http"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// deck.Deadliner's method on the socket.
const pathSetDeadline = "/v1/deadline"

type deadlineReq struct {
	ID string    `json:"id"`
	At time.Time `json:"at,omitzero"`
}

// handleDeadline serves SetDeadline where the deck has it.
func handleDeadline(s *Server, mux *http.ServeMux, d deck.Deck) {
	if dd, ok := d.(deck.Deadliner); ok {
		handle(s, mux, pathSetDeadline, func(ctx context.Context, r deadlineReq) (*model.Task, error) {
			return dd.SetDeadline(ctx, r.ID, r.At)
		})
	}
}

var _ deck.Deadliner = (*remote)(nil)

// SetDeadline implements deck.Deadliner.
func (r *remote) SetDeadline(ctx context.Context, id string, at time.Time) (t *model.Task, err error) {
	return t, r.do(ctx, http.MethodPost, pathSetDeadline, deadlineReq{id, at}, &t)
}

var _ deck.Deadliner = (*Client)(nil)

// SetDeadline implements deck.Deadliner, through whichever deck serves.
func (c *Client) SetDeadline(ctx context.Context, id string, at time.Time) (*model.Task, error) {
	return do(ctx, c, changing, func(d deck.Deck) (*model.Task, error) {
		dd, ok := d.(deck.Deadliner)
		if !ok {
			return nil, deck.Errorf(deck.KindFailed, "the taskdeck that owns the store cannot set deadlines; restart it with this version")
		}
		return dd.SetDeadline(ctx, id, at)
	})
}
