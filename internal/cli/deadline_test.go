package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/internal/clitest"
)

// `taskdeck deadline` (issue 27): get shows the configured deadline of a
// wait beside the server's TTL, and warns when the TTL ends first; a
// deadline set is the operator's and replaces it, "none" removes it. A
// deadline in the past, a time that does not parse, and a task that
// waits for no answer are refused with one line, exit 2.
func TestDeadlineCommand(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	c.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q,"deadline":"2h"}}}`, demoURL(t)))
	f := strings.Fields(c.run("call", "--server", "demo", "approve", "--args", `{"action":"deploy"}`, "--wait").Must(t, exitWaiting).Stdout)
	if len(f) < 2 {
		t.Fatal("call --wait printed no task id")
	}
	id := f[1]
	field := func(out, label string) string {
		for l := range strings.Lines(out) {
			if v, ok := strings.CutPrefix(l, label+":"); ok {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}

	out := c.run("get", id).Must(t, exitOK).Stdout
	if by := field(out, "answer by"); !strings.HasPrefix(by, "in 1h") || !strings.Contains(by, "configured") || !strings.Contains(by, "· server TTL in 9m") {
		t.Errorf("get: answer by %q, want in 1h… (configured) beside the demo's 10m TTL\n%s", by, out)
	}
	if w := field(out, "warning"); !strings.Contains(w, "the server's TTL ends 1h before the deadline: the task ends before anyone must answer") {
		t.Errorf("get: warning %q, want the TTL's\n%s", w, out)
	}

	set := c.run("deadline", id[:10], "5m").Must(t, exitOK).Stdout
	if !strings.Contains(set, "task "+id+" must be answered by ") || !strings.Contains(set, "(in 4m") {
		t.Errorf("deadline 5m said %q", set)
	}
	out = c.run("get", id).Must(t, exitOK).Stdout
	if by := field(out, "answer by"); !strings.HasPrefix(by, "in 4m") || !strings.Contains(by, "set by "+deck.LocalUser().Name) {
		t.Errorf("get after deadline 5m: answer by %q, want in 4m… set by %s", by, deck.LocalUser().Name)
	}
	if w := field(out, "warning"); w != "" {
		t.Errorf("get: warning %q with the deadline before the TTL", w)
	}
	c.run("deadline", id, "none").Must(t, exitOK)
	if by := field(c.run("get", id).Must(t, exitOK).Stdout, "answer by"); !strings.Contains(by, "configured") {
		t.Errorf("after deadline none: answer by %q, want the configured one again", by)
	}

	working := strings.Fields(c.run("call", "--server", "demo", "sleep", "--args", `{"seconds":600}`).Must(t, exitOK).Stdout)
	if len(working) != 1 {
		t.Fatalf("call printed no task id: %q", working)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--", id, "-5m"}, "is in the past; give a later time or a positive duration such as 2h"},
		{[]string{id, "2020-01-02T03:04:05Z"}, "deadline 2020-01-02T03:04:05Z is in the past"},
		{[]string{id, "soon"}, `deadline "soon": want a duration such as 2h or 30m, a time such as`},
		{[]string{id}, "`taskdeck deadline` takes ID (DURATION | TIME | none) (got 1 argument)"},
		{[]string{"zzzzzzzzzz", "1h"}, "zzzzzzzzzz"},
		{[]string{working[0], "1h"}, "waits for no answer, and a deadline bounds a wait for input"},
	} {
		r := c.run(append([]string{"deadline"}, tc.args...)...).Must(t, exitUsage)
		clitest.OneErrorLine(t, r, tc.want)
	}
}

// `taskdeck answer --deadline DEADLINE ID` (issue 27) is `taskdeck
// deadline ID DEADLINE`: it sets the wait's deadline, the operator's;
// "none" removes it. With a KEY and RESPONSE_JSON, or a deadline that
// does not parse, it is refused with one line, exit 2, and sets nothing.
func TestAnswerDeadline(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	c.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q}}}`, demoURL(t)))
	f := strings.Fields(c.run("call", "--server", "demo", "approve", "--args", `{"action":"deploy"}`, "--wait").Must(t, exitWaiting).Stdout)
	if len(f) < 2 {
		t.Fatal("call --wait printed no task id")
	}
	id := f[1]
	answerBy := func() string {
		for l := range strings.Lines(c.run("get", id).Must(t, exitOK).Stdout) {
			if v, ok := strings.CutPrefix(l, "answer by:"); ok {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--deadline", "1h", id, "approve-1", `{"action":"accept","content":{"approve":true}}`}, "answer --deadline takes the task's ID alone (no KEY or RESPONSE_JSON)"},
		{[]string{"--deadline", "1h"}, "answer --deadline takes the task's ID alone"},
		{[]string{"--deadline", "soon", id}, `deadline "soon": want a duration such as 2h or 30m`},
		{[]string{"--deadline=-5m", id}, "is in the past; give a later time"},
		{[]string{id, "approve-1"}, "`taskdeck answer` takes (ID KEY RESPONSE_JSON | --deadline DEADLINE ID) (got 2 arguments)"},
	} {
		r := c.run(append([]string{"answer"}, tc.args...)...).Must(t, exitUsage)
		clitest.OneErrorLine(t, r, tc.want)
	}
	if by := answerBy(); by != "" {
		t.Fatalf("refused answer --deadline left answer by %q", by)
	}

	set := c.run("answer", "--deadline", "90m", id[:10]).Must(t, exitOK).Stdout
	if !strings.Contains(set, "task "+id+" must be answered by ") || !strings.Contains(set, "(in 1h)") {
		t.Errorf("answer --deadline 90m said %q", set)
	}
	if by := answerBy(); !strings.HasPrefix(by, "in 1h (") || !strings.Contains(by, ", set by "+deck.LocalUser().Name+")") {
		t.Errorf("after answer --deadline 90m: answer by %q, want in 1h (…, set by %s)", by, deck.LocalUser().Name)
	}
	c.run("answer", "--deadline", "none", id).Must(t, exitOK)
	if by := answerBy(); by != "" {
		t.Errorf("after answer --deadline none: answer by %q, want none (no deadline configured)", by)
	}
}
