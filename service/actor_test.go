package service

import (
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/model"
)

// Through the socket a request acts as the peer's OS user (SO_PEERCRED),
// whatever it names unless it narrows itself to an agent: the audit log,
// read through the socket too, names each.
func TestSocketNamesThePeer(t *testing.T) {
	ctx := t.Context()
	_, _, _, r := serveEngine(t, startDemo(t))
	mine, err := r.Call(ctx, sleepCall(""))
	if err != nil {
		t.Fatal(err)
	}
	bot := model.Actor{Name: "ci-bot", Role: model.RoleAgent, Label: "claude"}
	agents, err := r.Call(deck.WithActor(ctx, bot), sleepCall(""))
	if err != nil {
		t.Fatal(err)
	}
	// A client may not make itself an operator or the engine.
	boss, err := r.Call(deck.WithActor(ctx, model.Actor{Name: "root", Role: model.RoleOperator}), sleepCall(""))
	if err != nil {
		t.Fatal(err)
	}
	log, err := r.Audit(ctx, model.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]model.Actor{}
	for _, e := range log.Entries {
		if e.Act == model.ActCall {
			by[e.Task] = e.Actor
		}
	}
	me := deck.LocalUser()
	if by[mine.Task.ID] != me || by[agents.Task.ID] != bot || by[boss.Task.ID] != me {
		t.Fatalf("the calls' actors: %+v, %+v, %+v; want %+v, %+v, %+v",
			by[mine.Task.ID], by[agents.Task.ID], by[boss.Task.ID], me, bot, me)
	}
	rep, err := r.VerifyAudit(ctx)
	if err != nil || rep.Fault != nil || rep.Entries == 0 {
		t.Fatalf("VerifyAudit through the socket: %+v, %v", rep, err)
	}
}

// A viewer, in process or through the socket, reads and is refused every
// change with a line that says why; nothing is written.
func TestViewerChangesNothing(t *testing.T) {
	ctx := t.Context()
	_, e, _, r := serveEngine(t, startDemo(t))
	res, err := r.Call(ctx, sleepCall(""))
	if err != nil {
		t.Fatal(err)
	}
	viewer := model.Actor{Name: "eve", Role: model.RoleViewer}
	for _, d := range []deck.Deck{e, r} {
		vctx := deck.WithActor(ctx, viewer)
		_, err := d.Call(vctx, sleepCall(""))
		if de := wantKind(t, "a viewer's call", err, deck.KindUsage); !strings.Contains(de.Message, "a viewer cannot make a call") {
			t.Fatalf("a viewer's call: %q", de.Message)
		}
		_, err = d.Cancel(vctx, res.Task.ID)
		wantKind(t, "a viewer's cancel", err, deck.KindUsage)
		wantKind(t, "a viewer's forget", d.Forget(vctx, res.Task.ID), deck.KindUsage)
		if got, err := d.Get(vctx, res.Task.ID); err != nil || got.Task.CancelRequested {
			t.Fatalf("a viewer's get: %+v, %v", got.Task, err)
		}
	}
	log, err := e.Audit(ctx, model.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range log.Entries {
		if en.Actor.Role == model.RoleViewer {
			t.Fatalf("a viewer's act was recorded: %+v", en)
		}
	}
}
