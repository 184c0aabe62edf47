// Package service serves a deck.Deck on the owner's unix socket and
// connects to it: one process owns the store (the engine) and every other
// taskdeck process on the host, a Go program included, works through the
// socket.
//
// Open is what a frontend calls. It connects to the owner when one
// answers on <dataDir>/taskdeck.sock; otherwise it becomes the owner by
// calling Options.Own (which opens the engine and so takes the store
// lock) and serving it. When the owner exits, the next request (or a
// feed, at once) chooses again, and one of the remaining processes takes
// over.
//
// The wire is HTTP/1.1 over the socket: a JSON body per request and per
// answer, and Watch as a streaming answer of newline-delimited JSON
// events, flushed one by one (as Docker's API does). An error crosses as
// a deck.Error (kind, message, task id); the client returns a *deck.Error
// of the same kind.
//
// The socket is 0600 in the 0700 data directory, and on Linux every
// connection's peer credentials (SO_PEERCRED) are checked before a byte
// is read: a process of another user is refused.
package service
