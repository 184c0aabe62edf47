package deck

import (
	"context"

	"github.com/taskdeck/taskdeck/model"
)

type actorKey struct{}

// WithActor returns a context that names the principal acting through it.
// Frontends set it where they learn who is asking (the socket's peer, the
// proxy's token, the process's user); the engine records it on every
// change the request makes.
func WithActor(ctx context.Context, a model.Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the principal a context names, and whether it names one.
func ActorFrom(ctx context.Context) (model.Actor, bool) {
	a, ok := ctx.Value(actorKey{}).(model.Actor)
	return a, ok
}
