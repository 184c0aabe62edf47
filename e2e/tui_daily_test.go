package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// approveCall is a tasks-aware agent's call of approve: the proxy answers
// at once with the task's handle.
const approveCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"approve","arguments":{"action":"ship"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"ux-agent","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`

// TestTUIServersPaletteAndAgents drives the built dashboard in tmux at
// 80×24 and 200×60 (and with NO_COLOR): a task an agent made through
// `proxy --stdio` shows its agent (its clientInfo name) in the AGENT column; S opens
// the servers view, with a server that stopped answering flagged and its
// error under the table; enter shows that server's tasks alone and esc
// comes back; the palette goes to :agent NAME, :group finished, :inbox
// and :servers; the header's servers and ? help fit 80×24 (the help
// scrolls).
func TestTUIServersPaletteAndAgents(t *testing.T) {
	eachScreen(t, tuiServersPaletteAndAgents)
}

func tuiServersPaletteAndAgents(t *testing.T, width, height int, noColor bool) {
	srv := startDemo(t, "127.0.0.1:0")
	flaky := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"demo":{"url":%q},"flaky":{"url":%q}}}`, srv.url, flaky.url))
	d.call("echo", `{"text":"hi"}`)
	d.run("call", "--server", "flaky", "sleep", "--args", `{"seconds":3000}`).Must(t, 0)
	flaky.p.kill() // its task's polls fail from now on

	// An agent's call through the stdio proxy, which ends once its
	// agent's stdin closes and the call is answered.
	agentEnd, stdin, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); agentEnd.Close() })
	px := startTDWithStdin(t, d.env, agentEnd, d.args([]string{"proxy", "--stdio", "demo"})...)
	if _, err := stdin.WriteString(approveCall + "\n"); err != nil {
		t.Fatal(err)
	}
	clitest.WaitFor(t, "the agent's task in the store", func() bool {
		for _, tk := range d.ls() {
			if tk.Tool == "approve" {
				return true
			}
		}
		return false
	})
	stdin.Close()
	<-px.done

	var env []string
	if noColor {
		env = append(env, "NO_COLOR=1")
	}
	tm := d.dashboard(width, height, env...)
	s := tm.waitScreen("the agent's row and flaky's failing poll", func(s string) bool {
		rows := rowsOf(s, "approve")
		return len(rows) == 1 && strings.Contains(rows[0].line, "ux-agen") && strings.Contains(s, "AGENT") && strings.Contains(s, "4 problems 1")
	})

	// The header names every server's health, or at 80 columns counts
	// them, names the troubled one and gives the servers view's key.
	header := "✗ flaky unreachable"
	if width < 100 {
		header = "servers ✗1 ✓1 (S)" // the names after it are cut
	}
	if !strings.Contains(s, header) {
		t.Errorf("the header lacks %q:\n%s", header, s)
	}

	// S: the servers view, each server on a row, flaky unreachable.
	tm.keys("S")
	s = tm.waitScreen("the servers view with flaky unreachable", func(s string) bool {
		return strings.Contains(s, "WAIT") && strings.Contains(s, "PUSH") && strings.Contains(lineOf(s, "  flaky "), "✗")
	})
	if demo := lineOf(s, "  demo "); !strings.Contains(demo, "✓") {
		t.Errorf("demo's row in the servers view: %q\n%s", demo, s)
	}
	// The first server (demo) is selected; the second is flaky, whose
	// error the lines under the table say whole.
	tm.keys("Down")
	tm.waitScreen("flaky's error under the table", func(s string) bool {
		return strings.Contains(strings.Join(strings.Fields(s), " "), "last error: server flaky unreachable: ") && strings.Contains(s, "connection refused")
	})
	tm.keys("Enter")
	s = tm.waitText("server: flaky")
	if rows := tableRows(s); len(rows) != 1 || rows[0].tool != "sleep" || rows[0].server != "flaky" {
		t.Errorf("enter on flaky shows %+v\n%s", rows, s)
	}
	tm.keys("Escape")
	tm.waitScreen("back in the servers view, on flaky", func(s string) bool { return strings.Contains(s, "PUSH") && strings.Contains(s, "last error:") })
	tm.keys("Escape")
	tm.waitScreen("every task again", func(s string) bool { return len(tableRows(s)) == 3 })

	// The palette goes places.
	palette := func(query string) {
		tm.keys(":")
		tm.waitText("Go to, or do")
		tm.typeText(query)
		tm.waitText("> " + query)
		tm.keys("Enter")
	}
	palette("agent ux-agent")
	s = tm.waitText("agent: ux-agent")
	if rows := tableRows(s); len(rows) != 1 || rows[0].tool != "approve" {
		t.Errorf(":agent ux-agent shows %+v\n%s", rows, s)
	}
	// Seen before the next key: an ESC closely followed by : reads as alt+:.
	tm.keys("Escape")
	tm.waitScreen("every task again", func(s string) bool { return len(tableRows(s)) == 3 })
	palette("group finished")
	s = tm.waitText("[3 finished 1]")
	if rows := tableRows(s); len(rows) != 1 || rows[0].tool != "echo" {
		t.Errorf(":group finished shows %+v\n%s", rows, s)
	}
	palette("inbox")
	s = tm.waitText("[2 waiting 1]")
	if rows := tableRows(s); len(rows) != 1 || rows[0].tool != "approve" || !strings.Contains(rows[0].line, "ux-agen") {
		t.Errorf(":inbox shows %+v\n%s", rows, s)
	}
	palette("servers")
	tm.waitText("PUSH", "BEHIND")
	tm.keys("Escape")
	tm.waitScreen("the table again", func(s string) bool { return !strings.Contains(s, "PUSH") })

	// ? help: scrolled to its legend's end where the screen is short.
	tm.keys("?")
	if height < 40 {
		tm.waitText("more lines (↑/↓, pgup/pgdn scroll)")
		tm.keys("NPage", "NPage")
	}
	tm.waitText("its last polls failed", "closes this help")
	tm.keys("x")
	tm.waitScreen("the help closed", func(s string) bool { return !strings.Contains(s, "closes this help") })

	if noColor {
		if n := sgrColours(tm.capture(true)); n != 0 {
			t.Errorf("NO_COLOR=1 but the screen has %d colour attributes", n)
		}
	}
	for i, l := range strings.Split(tm.screen(), "\n") {
		if w := len([]rune(l)); w > width {
			t.Fatalf("line %d is %d cells wide at %d columns: %q", i, w, width, l)
		}
	}
	tm.quit()
}

// lineOf is the first line of s holding sub.
func lineOf(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
