package ui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
)

// inertScreen fails when a screen carries anything but SGR (colour)
// escapes: another escape sequence, a C0 or C1 control other than
// newline, DEL, or a bidi control.
func inertScreen(t *testing.T, what, screen string) {
	t.Helper()
	rest := escapeSeq.ReplaceAllString(screen, "")
	for i, r := range rest {
		if r == '\n' {
			continue
		}
		if r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || termtext.IsBidiControl(r) {
			lo, hi := max(0, i-40), min(len(rest), i+40)
			t.Fatalf("%s: server text reached the screen with %U near %q", what, r, rest[lo:hi])
		}
	}
}

// hostileWords are the harmless words of demo.Hostile, in order: they
// must survive (sanitizing is not blanking).
const hostileWords = "red clear title clip link evil nul bell cr"

// TestHostileServerCannotControlTheDashboard drives the dashboard against
// a real demo server whose tool names, descriptions, status messages,
// input requests, results and errors carry terminal escapes, and checks
// every screen it shows: the table, the details, the answer form, the
// tool picker and the argument form.
func TestHostileServerCannotControlTheDashboard(t *testing.T) {
	var ok, bad *model.Task
	h := newHarnessWith(t, demo.Options{Hostile: true}, func(h *harness) {
		ok = h.call(demo.HostileTool, `{}`)
		bad = h.call(demo.HostileTool, `{"mode":"error"}`)
	})
	h.until("both ask", func(m *Model) bool { return m.list.waiting == 2 })
	inertScreen(t, "table", h.m.View().Content)
	if !strings.Contains(h.screen(), "red clear title") {
		t.Fatalf("the status message is gone from the table:\n%s", h.screen())
	}

	for _, task := range []*model.Task{ok, bad} {
		h.selectTask(task.ID)
		h.m.openDetail()
		inertScreen(t, "details of a task waiting for input", h.m.View().Content)
		h.key("esc")
		h.key("a")
		if h.m.mode() != modeForm {
			t.Fatalf("no answer form:\n%s", h.screen())
		}
		form := h.m.View().Content
		inertScreen(t, "answer form", form)
		if !strings.Contains(ansi.Strip(form), hostileWords) {
			t.Fatalf("the form lost the request's text:\n%s", ansi.Strip(form))
		}
		h.key("down") // to the second option, whose title is plain
		inertScreen(t, "answer form, option moved", h.m.View().Content)
		h.key("enter", "enter") // choose it; leave the optional note empty and submit
		h.until("the answer is sent", func(m *Model) bool {
			st := h.status(task.ID)
			return st == model.StatusCompleted || st == model.StatusFailed
		})
	}
	if h.status(ok.ID) != model.StatusCompleted || h.status(bad.ID) != model.StatusFailed {
		t.Fatalf("statuses %s and %s, want completed and failed", h.status(ok.ID), h.status(bad.ID))
	}
	inertScreen(t, "table after the answers", h.m.View().Content)
	for _, task := range []*model.Task{ok, bad} {
		h.selectTask(task.ID)
		h.m.openDetail()
		screen := h.m.View().Content
		inertScreen(t, "details of a finished task", screen)
		if !strings.Contains(ansi.Strip(screen), hostileWords) {
			t.Fatalf("the result or error text is gone:\n%s", ansi.Strip(screen))
		}
		h.key("esc")
	}

	// A new call: the tool picker lists the hostile names and descriptions,
	// and the argument form shows the hostile schema.
	h.key("n", "enter")
	h.until("tools listed", func(m *Model) bool {
		return m.mode() == modePick && strings.Contains(m.toolPick.title, "choose a tool")
	})
	inertScreen(t, "tool picker", h.m.View().Content)
	for h.m.toolPick.items[h.m.toolPick.cursor] != demo.HostileTool {
		h.key("down")
		inertScreen(t, "tool picker", h.m.View().Content)
	}
	h.key("enter")
	if h.m.mode() != modeForm {
		t.Fatalf("no argument form:\n%s", h.screen())
	}
	inertScreen(t, "argument form", h.m.View().Content)
	h.key("esc")

	// The tool whose name carries escapes is shown sanitized, and the call
	// would go out under the server's own name.
	h.key("n", "enter")
	h.until("tools listed", func(m *Model) bool {
		return m.mode() == modePick && strings.Contains(m.toolPick.title, "choose a tool")
	})
	shown := termtext.Line(demo.HostileToolName)
	for h.m.toolPick.items[h.m.toolPick.cursor] != shown {
		h.key("down")
	}
	h.key("enter")
	if h.m.mode() != modeForm || h.m.form.target.call == nil || h.m.form.target.call.tool != demo.HostileToolName {
		t.Fatalf("picking %q: mode %v, target %+v", shown, h.m.mode(), h.m.form)
	}
	inertScreen(t, "argument form", h.m.View().Content)
	h.key("esc")
	for _, r := range h.raw { // the bell and notifications: ours only
		if r != "\a" {
			t.Fatalf("unexpected raw output %q", r)
		}
	}
}
