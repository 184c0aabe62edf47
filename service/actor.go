package service

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os/user"
	"strconv"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// actorHeader carries the principal a client acts for when it is not its
// user: an agent behind `taskdeck proxy --stdio`, a read-only viewer.
const actorHeader = "Taskdeck-Actor"

type peerKey struct{}

// peerContext names, for every request on c, the OS user at its other
// end (admit has made sure it is the owner's).
func peerContext(ctx context.Context, c net.Conn) context.Context {
	a := deck.LocalUser()
	if uid, ok := peerUID(c); ok {
		a.Name = userName(uid)
	}
	ctx = context.WithValue(ctx, peerPIDKey{}, peerPID(c))
	return context.WithValue(ctx, peerKey{}, a)
}

// peerPIDKey holds the pid of the process at the other end (0: unknown).
type peerPIDKey struct{}

// userName is the name of uid, or the uid where it has none.
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return u.Username
	}
	return strconv.Itoa(uid)
}

// withActor puts the request's principal on its context: the peer's user,
// or the agent or viewer the client says it acts for. A peer is of the
// owner's uid, so it may narrow its rights, never widen them: any other
// role named is its user's.
func withActor(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := r.Context().Value(peerKey{}).(model.Actor)
		if !ok {
			a = deck.LocalUser()
		}
		var named model.Actor
		if v := r.Header.Get(actorHeader); v != "" && json.Unmarshal([]byte(v), &named) == nil && named.Name != "" &&
			(named.Role == model.RoleAgent || named.Role == model.RoleViewer) {
			a = named
		}
		h.ServeHTTP(w, r.WithContext(deck.WithActor(r.Context(), a)))
	})
}

// setActor names on req the principal ctx names, unless it is the user's
// own (which the owner learns from the socket).
func setActor(ctx context.Context, req *http.Request) {
	if a, ok := deck.ActorFrom(ctx); ok && (a.Role == model.RoleAgent || a.Role == model.RoleViewer) {
		if b, err := json.Marshal(a); err == nil {
			req.Header.Set(actorHeader, string(b))
		}
	}
}
