package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/nodetest"
	"github.com/taskdeck/taskdeck/internal/pgtest"
)

// allEvents are every event kind, so that a test sees each transition.
const allEvents = `["input_required","completed","failed","cancelled","unknown","orphaned"]`

// webhookDeck is a deck whose config sends events to a Standard Webhooks
// receiver (npm standardwebhooks' verifier) failing failPercent of the
// deliveries on purpose, with the secret in $TD_WEBHOOK_SECRET.
func webhookDeck(t *testing.T, failPercent int, events string) (*deck, *demoServer, *nodetest.Receiver) {
	t.Helper()
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte(rand.Text() + rand.Text())[:32])
	rcv := nodetest.StartReceiver(t, secret, failPercent)
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.env = append(d.env, "TD_WEBHOOK_SECRET="+secret)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}},
"notify":{"webhooks":[{"url":%q,"secret":"${TD_WEBHOOK_SECRET}","events":%s}]}}`, srv.url, rcv.URL, events))
	return d, srv, rcv
}

// expectedEvents is what the receiver must have been told of each task in
// the store: its present status, when that is an event, and input_required
// for a task that still waits.
func expectedEvents(t *testing.T, d *deck) map[string]bool {
	t.Helper()
	r := d.run("ls", "--json").Must(t, exitOK)
	want := map[string]bool{}
	for _, tk := range jsonLines(t, r) {
		switch tk.Status {
		case "input_required", "completed", "failed", "cancelled", "unknown", "orphaned":
			want[tk.ID+" task."+tk.Status] = true
		}
	}
	return want
}

// TestWebhooksSurviveAStormOfKills: tasks that fail, complete and wait for
// input are started while the owner (`taskdeck serve`) is SIGKILLed (by
// its pid) five times and the receiver fails 30% of the deliveries on
// purpose (never an event's third try). In the end the receiver,
// verifying every delivery with the standardwebhooks package, has each
// task's event (none missing), each event under one webhook-id (a
// receiver de-duplicating on it sees each once, none twice), and no
// delivery it could not verify.
func TestWebhooksSurviveAStormOfKills(t *testing.T) {
	t.Parallel()
	d, _, rcv := webhookDeck(t, 30, allEvents)
	owner := d.serve()
	calls := [][]string{
		{"fail", "--args", `{"mode":"error"}`},
		{"sleep", "--args", `{"seconds":1}`},
		{"approve", "--args", `{"action":"deploy"}`},
	}
	const rounds = 5
	launched := 0 // calls that exited 0; one the kill cut off may have made no task
	for round := range rounds {
		var procs []*proc
		for i := range 6 {
			procs = append(procs, d.start(append([]string{"call", "--server", "demo"}, calls[i%len(calls)]...)...))
		}
		before := len(rcv.Log(t).Accepted)
		clitest.WaitFor(t, fmt.Sprintf("round %d's first deliveries", round), func() bool { return len(rcv.Log(t).Accepted) > before })
		owner.cmd.Process.Signal(syscall.SIGKILL)
		<-owner.done
		for _, p := range procs {
			<-p.done
			if p.Code == exitOK {
				launched++
			}
		}
		owner = d.serve()
	}

	// The last round's sleeps may still be working when serve is back:
	// wait until every task is in a status that makes an event.
	var want map[string]bool
	clitest.WaitFor(t, fmt.Sprintf("every task (at least the %d launched) to reach a status that makes an event", launched), func() bool {
		want = expectedEvents(t, d)
		return len(want) >= launched && len(want) == len(d.ls())
	})
	var log nodetest.ReceiverLog
	missing := func() []string {
		log = rcv.Log(t)
		got := map[string]bool{}
		for _, a := range log.Accepted {
			got[a.Task+" "+a.Type] = true
		}
		var miss []string
		for ev := range want {
			if !got[ev] {
				miss = append(miss, ev)
			}
		}
		return miss
	}
	clitest.WaitFor(t, "every event to be delivered", func() bool { return len(missing()) == 0 })
	idOf := map[string]string{}
	repeats := 0
	for _, a := range log.Accepted {
		ev := a.Task + " " + a.Type
		switch prev, seen := idOf[ev]; {
		case !seen:
			idOf[ev] = a.ID
		case prev != a.ID:
			t.Errorf("event %s delivered under two webhook-ids, %s and %s: a receiver would act on it twice", ev, prev, a.ID)
		default:
			repeats++
		}
	}
	if log.Refused > 0 {
		t.Errorf("the receiver could not verify %d deliveries", log.Refused)
	}
	t.Logf("%d events over %d SIGKILLs: %d deliveries verified (%d repeats of a webhook-id after a kill), %d failed on purpose",
		len(want), rounds, len(log.Accepted), repeats, log.Failed)
	if strings.Contains(owner.Stderr.String(), "whsec_") {
		t.Errorf("the secret is in serve's output: %s", owner.Stderr)
	}
}

// TestWebhookTellsWhatWaitsAndHowToAnswer: with the owner running and the
// receiver taking every delivery, each event arrives once, signed; the
// input_required one carries the task's question and the command that
// answers it, and answering it with that command ends the task, which is
// told too. A failed task is told; a completed one is not (not asked for:
// the default events are input_required, failed and orphaned).
func TestWebhookTellsWhatWaitsAndHowToAnswer(t *testing.T) {
	t.Parallel()
	d, _, rcv := webhookDeck(t, 0, `["input_required","failed","completed"]`)
	d.serve()
	approve := strings.TrimSpace(d.run("call", "--server", "demo", "approve", "--args", `{"action":"deploy"}`).Must(t, exitOK).Stdout)
	failed := strings.TrimSpace(d.run("call", "--server", "demo", "fail", "--args", `{"mode":"error"}`).Must(t, exitOK).Stdout)
	var asked nodetest.Delivery
	clitest.WaitFor(t, "the input_required and failed events", func() bool {
		n := 0
		for _, a := range rcv.Log(t).Accepted {
			if a.Task == approve && a.Type == "task.input_required" {
				asked = a
				n++
			}
			if a.Task == failed && a.Type == "task.failed" {
				n++
			}
		}
		return n == 2
	})
	if len(asked.Questions) != 1 || asked.Status != "input_required" || !strings.HasPrefix(asked.Answer, "taskdeck answer "+approve+" ") {
		t.Fatalf("the input_required event: %+v", asked)
	}
	d.run("answer", approve, asked.Questions[0], `{"action":"accept","content":{"approve":true,"reason":"told by webhook"}}`).Must(t, exitOK)
	clitest.WaitFor(t, "the completed event", func() bool {
		for _, a := range rcv.Log(t).Accepted {
			if a.Task == approve && a.Type == "task.completed" {
				return true
			}
		}
		return false
	})
	log := rcv.Log(t)
	seen := map[string]bool{}
	for _, a := range log.Accepted {
		if seen[a.ID] {
			t.Errorf("webhook-id %s delivered twice with no kill and no failure", a.ID)
		}
		seen[a.ID] = true
	}
	if len(log.Accepted) != 3 || log.Refused != 0 {
		t.Errorf("the receiver took %d deliveries (want 3) and refused %d: %+v", len(log.Accepted), log.Refused, log.Accepted)
	}
}

// TestNotifyStatusShowsAFailingEndpoint: of two webhooks, one answers
// every delivery with a redirect (never followed: a failed attempt), the
// other takes them. `notify status`, through the serving owner, shows the
// first failing with its last error and its event pending, the second
// with its delivery, in text and in --json; no secret is printed.
func TestNotifyStatusShowsAFailingEndpoint(t *testing.T) {
	t.Parallel()
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte(rand.Text() + rand.Text())[:32])
	good := nodetest.StartReceiver(t, secret, 0)
	moved := nodetest.StartReceiver(t, secret, 0, "REDIRECT=1")
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.env = append(d.env, "TD_WEBHOOK_SECRET="+secret)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}},
"notify":{"webhooks":[{"url":%q,"secret":"${TD_WEBHOOK_SECRET}"},{"url":%q,"secret":"${TD_WEBHOOK_SECRET}"}]}}`, srv.url, moved.URL+"?token=abc", good.URL))
	d.serve()
	d.run("call", "--server", "demo", "fail", "--args", `{"mode":"error"}`).Must(t, exitOK)
	type status struct {
		Kind, Target, LastError string
		Delivered, Pending      int
		Failing                 bool
	}
	var eps []status
	clitest.WaitFor(t, "one delivery and one failure", func() bool {
		eps = nil
		for line := range strings.Lines(d.run("notify", "status", "--json").Must(t, exitOK).Stdout) {
			var s status
			if err := json.Unmarshal([]byte(line), &s); err != nil {
				t.Fatal(err)
			}
			eps = append(eps, s)
		}
		return len(eps) == 2 && eps[0].Failing && eps[1].Delivered == 1
	})
	if eps[0].Pending != 1 || !strings.Contains(eps[0].LastError, "307") || !strings.Contains(eps[0].LastError, "redirects are not followed") ||
		strings.Contains(eps[0].Target+eps[0].LastError, "abc") || eps[1].Pending != 0 || eps[1].Failing {
		t.Errorf("notify status --json: %+v", eps)
	}
	text := d.run("notify", "status").Must(t, exitOK).Stdout
	if !strings.Contains(text, "failing since") || !strings.Contains(text, "DELIVERED") || strings.Contains(text, "whsec_") {
		t.Errorf("notify status:\n%s", text)
	}
	t.Logf("notify status:\n%s", text)
}

// TestWebhooksFromAFleet: two `taskdeck serve` engines on one PostgreSQL
// database deliver the events of tasks made through either, the receiver
// failing 30% on purpose, while one engine is SIGKILLed (by its pid) and
// started again twice: each event arrives under one webhook-id, none is
// missing, and every delivery verifies. An event the killed engine had
// claimed is delivered by another once its claim's lease lapses.
func TestWebhooksFromAFleet(t *testing.T) {
	t.Parallel()
	db := pgtest.DB(t)
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte(rand.Text() + rand.Text())[:32])
	rcv := nodetest.StartReceiver(t, secret, 30)
	srv := startDemo(t, "127.0.0.1:0")
	var decks []*deck
	var engines []*proc
	for range 2 {
		d := newDeck(t)
		d.env = append(d.env, "TD_WEBHOOK_SECRET="+secret)
		d.writeConfig(fmt.Sprintf(`{"store":%q,"mcpServers":{"demo":{"url":%q}},
"notify":{"webhooks":[{"url":%q,"secret":"${TD_WEBHOOK_SECRET}","events":%s}]}}`, db, srv.url, rcv.URL, allEvents))
		decks = append(decks, d)
		engines = append(engines, d.start("serve"))
	}
	started := func(p *proc) {
		fleetWait(t, 20*time.Second, "an engine to start", func() bool { return p.exited() || strings.Contains(p.Stderr.String(), "watching") })
		if p.exited() {
			t.Fatalf("serve exited %d: %s", p.Code, p.Stderr)
		}
	}
	for _, p := range engines {
		started(p)
	}
	calls := [][]string{{"fail", "--args", `{"mode":"error"}`}, {"sleep", "--args", `{"seconds":1}`}, {"approve", "--args", `{"action":"deploy"}`}}
	const rounds, perRound = 2, 6
	for round := range rounds {
		for i := range perRound {
			decks[i%2].run(append([]string{"call", "--server", "demo"}, calls[i%len(calls)]...)...).Must(t, exitOK)
		}
		before := len(rcv.Log(t).Accepted)
		fleetWait(t, 30*time.Second, "deliveries", func() bool { return len(rcv.Log(t).Accepted) > before })
		victim := engines[round%2]
		victim.cmd.Process.Signal(syscall.SIGKILL)
		<-victim.done
		engines[round%2] = decks[round%2].start("serve")
		started(engines[round%2])
	}
	// A sleep may still be working when its engine is back.
	var want map[string]bool
	fleetWait(t, 30*time.Second, "every call's task to reach a status that makes an event", func() bool {
		want = expectedEvents(t, decks[0])
		return len(want) >= rounds*perRound
	})
	var log nodetest.ReceiverLog
	// A claim of the killed engine lapses after its lease (30 s).
	fleetWait(t, 90*time.Second, "every event to be delivered", func() bool {
		log = rcv.Log(t)
		got := map[string]bool{}
		for _, a := range log.Accepted {
			got[a.Task+" "+a.Type] = true
		}
		for ev := range want {
			if !got[ev] {
				return false
			}
		}
		return true
	})
	idOf := map[string]string{}
	for _, a := range log.Accepted {
		ev := a.Task + " " + a.Type
		if prev, seen := idOf[ev]; seen && prev != a.ID {
			t.Errorf("event %s delivered under two webhook-ids, %s and %s", ev, prev, a.ID)
		}
		idOf[ev] = a.ID
	}
	if log.Refused > 0 {
		t.Errorf("the receiver could not verify %d deliveries", log.Refused)
	}
	t.Logf("%d events from a fleet of two over %d SIGKILLs: %d deliveries verified, %d failed on purpose", len(want), rounds, len(log.Accepted), log.Failed)
}
