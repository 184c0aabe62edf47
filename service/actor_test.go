package service

import (
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
	log, err := r.(deck.Auditor).Audit(ctx, model.AuditFilter{})
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
	rep, err := r.(deck.Auditor).VerifyAudit(ctx)
	if err != nil || rep.Fault != nil || rep.Entries == 0 {
		t.Fatalf("VerifyAudit through the socket: %+v, %v", rep, err)
	}
}
