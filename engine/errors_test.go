package engine

import (
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/hostile"
	"github.com/taskdeck/taskdeck/model"
)

func TestErrorsCarryTheirKind(t *testing.T) {
	srv := startDemo(t, demo.Options{})
	dir := t.TempDir()
	e := open(t, dir, srv, Options{})
	ctx := ctxT(t)

	t.Run("bad arguments are usage", func(t *testing.T) {
		_, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "echo", Args: json.RawMessage(`[1]`)})
		kindIs(t, err, deck.KindUsage)
	})
	t.Run("an unknown server is usage", func(t *testing.T) {
		_, err := e.Call(ctx, deck.CallRequest{Server: model.ServerRef{Name: "nope"}, Tool: "echo"})
		kindIs(t, err, deck.KindUsage)
	})
	t.Run("an unknown tool is usage, and nothing is written or sent", func(t *testing.T) {
		sent := len(srv.Requests("tools/call"))
		res, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "ech"})
		kindIs(t, err, deck.KindUsage)
		if !strings.Contains(err.Error(), "did you mean echo") {
			t.Errorf("error %q does not name the tool meant", err)
		}
		if n := len(srv.Requests("tools/call")) - sent; n != 0 || res.Task != nil {
			t.Fatalf("%d tools/call sent, record %+v, for an unknown tool; want none", n, res.Task)
		}
		if list, err := e.List(ctx, deck.Filter{Tool: "ech"}); err != nil || len(list) != 0 {
			t.Fatalf("List of the unknown tool: %d records, %v; want none", len(list), err)
		}
	})
	t.Run("a key naming another call is a conflict", func(t *testing.T) {
		if _, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "echo", Args: json.RawMessage(`{"text":"a"}`), Key: "k"}); err != nil {
			t.Fatal(err)
		}
		again, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "echo", Args: json.RawMessage(`{"text":"a"}`), Key: "k"})
		if err != nil || !again.Reused {
			t.Fatalf("same call, same key = %+v, %v; want the record reused", again, err)
		}
		_, err = e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "echo", Args: json.RawMessage(`{"text":"b"}`), Key: "k"})
		kindIs(t, err, deck.KindConflict)
	})
	t.Run("cancelling an ended task is state", func(t *testing.T) {
		res, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "echo", Args: json.RawMessage(`{"text":"x"}`)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.Cancel(ctx, res.Task.ID)
		kindIs(t, err, deck.KindState)
	})
	t.Run("a refused call is refused and names its record", func(t *testing.T) {
		srv.On("tools/call", hostile.Error(-32000, "no"))
		defer srv.On("tools/call", nil)
		res, err := e.Call(ctx, deck.CallRequest{Server: demoRef, Tool: "sleep", Args: json.RawMessage(`{"seconds":1}`)})
		de := kindIs(t, err, deck.KindRefused)
		if res.Task == nil || de.TaskID != res.Task.ID || res.Task.Status != model.StatusFailed {
			t.Fatalf("error names %q, result %+v; want the failed record named", de.TaskID, res.Task)
		}
	})
	t.Run("an unreachable server is unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		url := "http://" + l.Addr().String() + "/mcp"
		l.Close()
		_, err = e.Call(ctx, deck.CallRequest{Server: model.ServerRef{URL: url}, Tool: "echo"})
		kindIs(t, err, deck.KindUnreachable)
	})
	t.Run("ids and prefixes", func(t *testing.T) {
		_, err := e.Get(ctx, "zzzz")
		de := kindIs(t, err, deck.KindNotFound)
		if !strings.Contains(de.Message, "`taskdeck ls` lists them") {
			t.Fatalf("message %q", de.Message)
		}
		// A whole id is not read before the poll: the poll's own read
		// finds it missing, in the same words.
		err = e.PollNow(ctx, []string{strings.Repeat("z", model.IDLen)})
		if de := kindIs(t, err, deck.KindNotFound); !strings.Contains(de.Message, "`taskdeck ls` lists them") {
			t.Fatalf("PollNow: message %q", de.Message)
		}
		_, err = e.Get(ctx, "0") // every id of this century starts so
		de = kindIs(t, err, deck.KindUsage)
		if !strings.Contains(de.Message, "matches several tasks") {
			t.Fatalf("message %q", de.Message)
		}
	})
	t.Run("a store held by another is locked", func(t *testing.T) {
		_, err := Open(Options{DataDir: dir})
		kindIs(t, err, deck.KindLocked)
	})
}
