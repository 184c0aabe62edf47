package engine

import (
	"context"
	"os"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// actorOf is the principal a request's context names (Engine.begin names
// one on every request), else this process's user.
func actorOf(ctx context.Context) model.Actor {
	if a, ok := deck.ActorFrom(ctx); ok && !a.IsZero() {
		return a
	}
	return deck.LocalUser()
}

// actor is the principal of a request: the one its context names, else
// this process's user; on a fleet, acting from this host unless named.
func (e *Engine) actor(ctx context.Context) model.Actor {
	a := actorOf(ctx)
	if a.Host == "" {
		a.Host = e.host
	}
	return a
}

// mayChange refuses a viewer's request to change records: it may list,
// watch and read, and is told what it cannot do.
func mayChange(ctx context.Context, what string) error {
	if a := actorOf(ctx); !a.CanChange() {
		return deck.Errorf(deck.KindUsage, "%s is a viewer: a viewer cannot %s (read-only)", a.Name, what)
	}
	return nil
}

// fleetHost names this host on a shared store; "" on Badger, where every
// act is this host's.
func fleetHost(shared bool) string {
	if !shared {
		return ""
	}
	h, _ := os.Hostname()
	return h
}
