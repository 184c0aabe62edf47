package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
)

// TestInboxOldestWaitFirstAndAnsweredInDetail: 2 shows every task that
// waits for an answer, who waited longest first (not the table's newest
// first), with how long each has waited; a answers the selected one
// after an hour with nothing timed out; the detail pane then lists what
// was answered and when.
func TestInboxOldestWaitFirstAndAnsweredInDetail(t *testing.T) {
	var first *model.Task
	h := newHarness(t, func(h *harness) {
		h.call("sleep", `{"seconds":600}`)
		first = h.call("approve", `{"action":"deploy"}`)
	})
	h.until("the first approval waits", func(m *Model) bool { return m.list.waiting == 1 })
	second := h.call("approve", `{"action":"rollback"}`)
	h.until("both wait", func(m *Model) bool { return m.list.waiting == 2 })

	h.key("2")
	ids := visibleIDs(h.m)
	if len(ids) != 2 || ids[0] != first.ID || ids[1] != second.ID {
		t.Fatalf("the inbox shows %v, want %s (waited longest) then %s", ids, first.ID, second.ID)
	}
	screen := h.screen()
	for _, want := range []string{"[2 waiting 2]", "WAIT ", "sort: waited longest", "asks: Approve deploy?", "group: waiting for me"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the inbox lacks %q:\n%s", want, screen)
		}
	}

	h.key("a") // the selected one: who waited longest
	if h.m.mode() != modeForm || !strings.Contains(h.screen(), "Approve deploy?") {
		t.Fatalf("a opened no form for the first approval:\n%s", h.screen())
	}
	// An hour goes by on the dashboard's clock: the form is still there.
	h.send(tickMsg(time.Now().Add(time.Hour)))
	if h.m.mode() != modeForm {
		t.Fatalf("the form closed after an hour:\n%s", h.screen())
	}
	h.key("left", "enter")
	h.until("the reason field is focused", func(m *Model) bool { return strings.Contains(h.screen(), "┃ Reason *") })
	h.typeText("all green")
	h.key("enter")
	h.until("the answered one leaves the inbox", func(m *Model) bool {
		ids := visibleIDs(m)
		return len(ids) == 1 && ids[0] == second.ID
	})

	h.key("0")
	h.selectTask(first.ID)
	h.key("enter")
	h.until("the detail pane lists the answer", func(m *Model) bool { return strings.Contains(h.screen(), "Answered") })
	detail := h.screen()
	if !strings.Contains(detail, `"action":"accept"`) || !strings.Contains(detail, "all green") || !strings.Contains(detail, " ago)") {
		t.Fatalf("the detail pane does not say what was answered and when:\n%s", detail)
	}
}

func visibleIDs(m *Model) []string {
	var ids []string
	for _, r := range m.list.visible {
		ids = append(ids, r.task.ID)
	}
	return ids
}

// TestInboxSaysWhichAgentWaits: in the inbox (2) a task an agent made
// through the proxy says which agent waits on you, in an AGENT column,
// at 80 columns too; a waiting task of the user's own has none.
func TestInboxSaysWhichAgentWaits(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {200, 60}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			tasks := serverTasks() // t02 (deploy on build) and t90 (on web) wait
			tasks[1].Agent = "ci-bot"
			m := loaded(t, tasks, size[0], size[1])
			m.Update(keyMsg("2"))
			if ids := visibleIDs(m); len(ids) != 2 {
				t.Fatalf("the inbox shows %v, want the two waiting tasks", ids)
			}
			s := plainView(m)
			head := lineWith(s, "ID ")
			col := strings.Index(head, "AGENT")
			if col < 0 {
				t.Fatalf("the inbox has no AGENT column:\n%s", s)
			}
			for id, want := range map[string]string{tasks[1].ID: "ci-bot", "t90": ""} {
				row := []rune(lineWith(s, id))
				if len(row) <= col {
					t.Fatalf("no row %s in the inbox:\n%s", id, s)
				}
				got, _, _ := strings.Cut(strings.TrimSpace(string(row[col:])), " ")
				if want == "" && !strings.HasPrefix(string(row[col:]), "  ") || want != "" && got != want {
					t.Errorf("%s's AGENT cell: %q, want %q\n%s", id, string(row[col:]), want, s)
				}
			}
		})
	}
}
