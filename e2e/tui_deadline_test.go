package e2e

import (
	"fmt"
	"os/user"
	"regexp"
	"strings"
	"testing"
	"time"
)

// answerIn reads the detail pane's countdown: "answer by  in 4m58s (…".
var answerIn = regexp.MustCompile(`answer by\s+in (\d+)m(\d+)s \(`)

// TestTUIDeadlineCountdownAndTTLWarning (issue 27): the detail pane of a
// task waiting for input shows the configured deadline of its tool beside
// the server's TTL, and warns that the TTL (the demo's 10 min) ends
// before the 2 h deadline. A deadline set with `taskdeck deadline` while
// the dashboard owns the store (through its socket) replaces it: the
// pane names who set it, the warning goes, the countdown counts down;
// at the deadline the dashboard's engine escalates the wait, and the
// pane says so.
func TestTUIDeadlineCountdownAndTTLWarning(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q,"toolDeadlines":{"approve":"2h"}}}}`, srv.url))
	id := d.call("approve", `{"action":"deploy"}`)

	tm := d.dashboard(150, 40)
	tm.waitScreen("the approve task waiting for input", func(s string) bool { return oneRow(s, "approve") == "input_required" })
	tm.selectRow("approve")
	tm.keys("Enter")
	s := tm.waitText("answer by", "configured) · server TTL in 9m")
	if !regexp.MustCompile(`answer by\s+in [12]h \(`).MatchString(s) {
		t.Fatalf("the detail pane should count the 2 h deadline down (in 1h or 2h); screen:\n%s", s)
	}
	tm.waitText("! the server's TTL ends 1h before the deadline: the task ends before anyone must answer")

	d.run("deadline", id, "5m").Must(t, 0)
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	first := tm.waitScreen("the deadline set, by this user", func(s string) bool {
		return answerIn.MatchString(s) && strings.Contains(s, "set by "+me.Username+") · server TTL in 9m")
	})
	if strings.Contains(first, "TTL ends") {
		t.Fatalf("the TTL warning stays with the deadline before the TTL; screen:\n%s", first)
	}
	secs := func(s string) int {
		m := answerIn.FindStringSubmatch(s)
		var min, sec int
		fmt.Sscan(m[1], &min)
		fmt.Sscan(m[2], &sec)
		return min*60 + sec
	}
	was := secs(first)
	tm.waitScreen("the countdown to move", func(s string) bool { return answerIn.MatchString(s) && secs(s) < was })

	d.run("deadline", id, "3s").Must(t, 0)
	tm.waitScreenFor(tuiTimeout+5*time.Second, "the wait escalated at its deadline", func(s string) bool {
		return regexp.MustCompile(`answer by\s+passed \d+s ago`).MatchString(s) && strings.Contains(s, "· escalated ")
	})
	// q only once the table is back: sent with the ESC unread, it is alt+q.
	tm.keys("Escape")
	tm.waitScreen("the table again", func(s string) bool { return !strings.Contains(s, "answer by") })
	tm.quit()
}

// TestTUISetDeadlineWithD (issue 27): D in the detail pane of a task
// waiting for input opens the deadline prompt on the status line; 90m and
// enter set the deadline, and the pane counts it down, set by this user.
func TestTUISetDeadlineWithD(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}}}`, srv.url))
	id := d.call("approve", `{"action":"deploy"}`)
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}

	tm := d.dashboard(150, 40)
	tm.waitScreen("the approve task waiting for input", func(s string) bool { return oneRow(s, "approve") == "input_required" })
	tm.selectRow("approve")
	tm.keys("Enter")
	tm.waitText("task", id)
	tm.keys("D")
	tm.waitText("deadline of ")
	tm.typeText("90m")
	tm.keys("Enter")
	s := tm.waitText("set by " + me.Username + ") · server TTL in 9m")
	if !regexp.MustCompile(`answer by\s+in 1h \(`).MatchString(s) {
		t.Fatalf("the detail pane should count the 90m deadline down (in 1h); screen:\n%s", s)
	}
	tm.keys("Escape")
	tm.waitScreen("the table again", func(s string) bool { return !strings.Contains(s, "answer by") })
	tm.quit()
}
