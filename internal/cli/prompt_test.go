package cli

import (
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// lastLine is the last line a command wrote on stderr (the prompt writes
// its questions there too).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestPromptAnswersTaskInput: on a terminal, `call --wait` asks for each
// field of each input request, asks again until the value passes the
// schema (an email, an option, a number in range; NaN is not a number),
// and sends what was typed.
func TestPromptAnswersTaskInput(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	c.prompt = strings.Join([]string{
		"", // accept, the default
		"not-an-email", "a@example.com",
		"gold", "team",
		"a", // accept, by its prefix
		"NaN", "Inf", "11", "8",
	}, "\n") + "\n"
	r := c.run("call", "--url", demoURL(t), "survey", "--wait").Must(t, exitOK)
	clitest.MustContain(t, r, r.Stdout, "survey: email=a@example.com plan=team score=8")
	clitest.MustContain(t, r, r.Stderr,
		"How can we reach you, and on which plan?", "Email (string)", "must be an email address",
		"must be one of: free, pro, team", "How would you rate us (1 to 10)?", "must be at most 10")
	if n := strings.Count(r.Stderr, "must be a number"); n != 2 {
		t.Fatalf("NaN and Inf should each be refused as not a number, got %d refusals\n%s", n, r)
	}
}

// TestPromptAnswersBeforeTheTask: input asked on tools/call itself, before
// any task exists, is asked on the terminal too; a boolean takes yes/no.
func TestPromptAnswersBeforeTheTask(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	c.prompt = "\nmaybe\ny\n"
	r := c.run("call", "--url", demoURL(t), "confirm_first", "--wait").Must(t, exitOK)
	clitest.MustContain(t, r, r.Stderr, "Confirm (boolean)", "answer yes or no")
}

// TestPromptDecline: declining sends a decline; the demo's approve then
// ends with a tool error.
func TestPromptDecline(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	c.prompt = "d\n"
	r := c.run("call", "--url", demoURL(t), "approve", "--args", `{"action":"deploy"}`, "--wait").Must(t, exitTaskBad)
	clitest.MustContain(t, r, r.Stderr, "Approve deploy?", "accept, decline or cancel?")
	if l := lastLine(r.Stderr); !strings.Contains(l, "completed with a tool error") {
		t.Fatalf("want the tool error last\n%s", r)
	}
}

// TestPromptEndOfInput: when the terminal's input ends mid-form, nothing
// is sent and the call stops where the task waits, with the command that
// answers it.
func TestPromptEndOfInput(t *testing.T) {
	t.Parallel()
	c := newInproc(t)
	c.prompt = "accept\n"
	r := c.run("call", "--url", demoURL(t), "approve", "--args", `{"action":"deploy"}`, "--wait").Must(t, exitWaiting)
	clitest.MustContain(t, r, r.Stderr, "input aborted")
	if l := lastLine(r.Stderr); !strings.HasPrefix(l, "taskdeck: ") || !strings.Contains(l, "taskdeck answer") {
		t.Fatalf("want the answer command last\n%s", r)
	}
}
