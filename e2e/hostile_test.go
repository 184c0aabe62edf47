package e2e

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/termtext"
)

// hostileWords are the harmless words of demo.Hostile: sanitizing must
// keep them.
const hostileWords = "red clear title clip link evil nul bell cr"

// hostileAnswer answers the hostile tool's input request.
const hostileAnswer = `hostile-1={"action":"accept","content":{"choice":"b"}}`

// inertText fails when plain output carries a control character (ESC,
// BEL, NUL, CR, DEL, C1 such as U+009B) or a bidi control. The command
// line prints no colours, so not even SGR sequences are allowed.
func inertText(t *testing.T, r clitest.Result, what, s string) {
	t.Helper()
	for i, c := range s {
		if c == '\n' || c == '\t' {
			continue
		}
		if c < 0x20 || c == 0x7f || c >= 0x80 && c <= 0x9f || termtext.IsBidiControl(c) || c == 0xfffd {
			lo, hi := max(0, i-30), min(len(s), i+30)
			t.Fatalf("%s carries %U near %q\n%s", what, c, s[lo:hi], r)
		}
	}
}

func inertPlain(t *testing.T, r clitest.Result) {
	t.Helper()
	inertText(t, r, "stdout", r.Stdout)
	inertText(t, r, "stderr", r.Stderr)
}

// jsonLines parses stdout as JSON lines, checks that no raw control or
// bidi character is in them (they must be \u-escaped), and returns them.
func jsonLines(t *testing.T, r clitest.Result) []task {
	t.Helper()
	inertText(t, r, "JSON stdout", r.Stdout)
	inertText(t, r, "stderr", r.Stderr)
	var out []task
	sc := bufio.NewScanner(strings.NewReader(r.Stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			if !json.Valid([]byte(line)) {
				t.Fatalf("not valid JSON: %q\n%s", line, r)
			}
			out = append(out, parseTask(t, line))
		}
	}
	if len(out) == 0 {
		t.Fatalf("no JSON lines\n%s", r)
	}
	return out
}

// inputMessage returns the message of a task's hostile input request.
func inputMessage(t *testing.T, tk task) string {
	t.Helper()
	var req struct {
		Params struct {
			Message         string `json:"message"`
			RequestedSchema struct {
				Properties map[string]struct {
					Title string `json:"title"`
				} `json:"properties"`
			} `json:"requestedSchema"`
		} `json:"params"`
	}
	if err := json.Unmarshal(tk.InputRequests["hostile-1"], &req); err != nil {
		t.Fatalf("input request: %v", err)
	}
	if got := req.Params.RequestedSchema.Properties["choice"].Title; got != demo.Hostile {
		t.Fatalf("field title in JSON %q, want the server's text %q", got, demo.Hostile)
	}
	return req.Params.Message
}

// TestHostileServerTextCLI: text from a server that carries terminal
// escapes reaches the plain output of tools, call --wait, get, ls and
// watch inert (its words kept), and the --json output as valid JSON that
// holds exactly the server's text, escaped.
func TestHostileServerTextCLI(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0", "--hostile")
	d := newDeck(t)

	r := d.run("tools", "--url", srv.url).Must(t, 0)
	inertPlain(t, r)
	clitest.MustContain(t, r, r.Stdout, "hostile ", hostileWords)
	if strings.Count(r.Stdout, hostileWords) != 2 { // two names, one description each
		t.Fatalf("want both hostile tools listed\n%s", r)
	}

	// call --wait, answering on the way: completes with a hostile result.
	r = d.run("call", "--url", srv.url, demo.HostileTool, "--wait", "--input", hostileAnswer).Must(t, 0)
	inertPlain(t, r)
	clitest.MustContain(t, r, r.Stdout, "input_required", "input hostile-1: "+hostileWords, "result: "+hostileWords)
	// The same with --json: every line valid, the texts exactly the server's.
	r = d.run("call", "--url", srv.url, demo.HostileTool, "--wait", "--json", "--input", hostileAnswer).Must(t, 0)
	lines := jsonLines(t, r)
	last := lines[len(lines)-1]
	if last.Status != "completed" || last.StatusMessage != demo.Hostile || last.resultText() != "result: "+demo.Hostile {
		t.Fatalf("JSON lost or changed the server's text: %+v\n%s", last, r)
	}
	for _, tk := range lines {
		if tk.Status == "input_required" && inputMessage(t, tk) != demo.Hostile {
			t.Fatalf("input request message changed\n%s", r)
		}
	}

	// A failed task: the error message.
	r = d.run("call", "--url", srv.url, demo.HostileTool, "--args", `{"mode":"error"}`, "--wait", "--input", hostileAnswer).Must(t, exitTaskBad)
	inertPlain(t, r)
	clitest.MustContain(t, r, r.Stdout, "failed", "error -32603: "+hostileWords)
	failed := jsonLines(t, d.run("ls", "--json", "--status", "failed").Must(t, 0))[0]
	if failed.Error == nil || failed.Error.Message != demo.Hostile {
		t.Fatalf("error message in JSON: %+v", failed.Error)
	}

	// A task left waiting: call --wait stops there (exit 5); get, ls and
	// watch show it.
	r = d.run("call", "--url", srv.url, demo.HostileTool, "--wait").Must(t, exitWaiting)
	inertPlain(t, r)
	clitest.MustContain(t, r, r.Stdout, "input hostile-1: "+hostileWords, "fields: choice (string, required)")
	waiting := jsonLines(t, d.run("ls", "--json", "--status", "input_required").Must(t, 0))[0]
	if waiting.StatusMessage != demo.Hostile || inputMessage(t, waiting) != demo.Hostile {
		t.Fatalf("waiting task in JSON: %+v", waiting)
	}

	r = d.run("get", waiting.ID).Must(t, 0)
	inertPlain(t, r)
	clitest.MustContain(t, r, r.Stdout, "message:       "+hostileWords, "input hostile-1: "+hostileWords)
	if tk := jsonLines(t, d.run("get", waiting.ID, "--json").Must(t, 0))[0]; tk.StatusMessage != demo.Hostile {
		t.Fatalf("get --json: %+v", tk)
	}
	r = d.run("get", failed.ID).Must(t, 0)
	inertPlain(t, r)
	clitest.MustContain(t, r, r.Stdout, "error:", hostileWords)
	r = d.run("ls").Must(t, 0)
	inertPlain(t, r)
	if strings.Count(r.Stdout, "red clear title") != 4 {
		t.Fatalf("ls should show the message of all 4 tasks\n%s", r)
	}
	r = d.run("watch").Must(t, 0)
	inertPlain(t, r)
	clitest.MustContain(t, r, r.Stdout, "reconciled:", "input hostile-1: "+hostileWords)
	r = d.run("watch", "--json").Must(t, 0)
	for _, tk := range jsonLines(t, r) {
		if tk.StatusMessage != demo.Hostile {
			t.Fatalf("watch --json changed the status message: %q", tk.StatusMessage)
		}
	}

	// An answer the schema refuses: the one-line error is inert too.
	r = d.run("answer", waiting.ID, "hostile-1", `{"action":"accept","content":{"choice":"zzz"}}`).Must(t, exitUsage)
	inertPlain(t, r)
	clitest.OneErrorLine(t, r, "choice")
	// Hostile bytes in the command line's own arguments come back inert.
	r = d.run("get", "\x1b]0;x\x07\u202e\u009b").Must(t, exitUsage)
	inertPlain(t, r)
	r = d.run("ls", "--status", "\x1b[2J").Must(t, exitUsage)
	inertPlain(t, r)
	r = d.run("ls", "--bogus\x1b]0;x\x07").Must(t, exitUsage)
	inertPlain(t, r)
}
