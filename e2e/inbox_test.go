package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/nodetest"
	"github.com/taskdeck/taskdeck/internal/testproc"
	"github.com/taskdeck/taskdeck/model"
)

// TestInboxFromTypeScriptClient: a task of `taskdeck call` waits for an
// approval; an operator in the official TypeScript MCP client, at `serve
// --proxy`'s /inbox with the proxy's token, lists it, shows its form and
// answers it; the task completes with that answer, and `taskdeck audit
// --json` names the operator principal as who answered.
func TestInboxFromTypeScriptClient(t *testing.T) {
	t.Parallel()
	dir := nodetest.Install(t, filepath.Join("..", "proxy", "testdata", "agent"), "inbox.mjs")
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"build":{"url":%q}}}`, srv.url))
	const token = "e2e-operator-token-0123456789abcdef"
	d.env = append(d.env, "TASKDECK_PROXY_TOKEN="+token)
	_, base := d.serveProxy()

	id := clitest.OnlyID(t, d.run("call", "--server", "build", "approve", "--args", `{"action":"deploy"}`).Must(t, exitOK))
	clitest.WaitFor(t, "the task waiting for its approval", func() bool {
		tk, ok := d.lsByID()[id]
		return ok && tk.Status == "input_required" && len(tk.InputRequests) > 0
	})

	cmd, stdout, stderr := startNodeScript(t, dir, []string{"TASKDECK_OPERATOR_TOKEN=" + token}, "inbox.mjs", base+"/inbox", `{"approve":true,"reason":"from the inbox"}`)
	t.Cleanup(func() { _ = testproc.Signal(cmd, syscall.SIGKILL); _ = cmd.Wait() })
	var lines []string
	for sc := bufio.NewScanner(stdout); sc.Scan(); {
		lines = append(lines, sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the TypeScript operator: %v\n%s\n%s", err, strings.Join(lines, "\n"), stderr.String())
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{`"tools":["inbox_answer","inbox_list","inbox_show","task_status"]`, `"task":"` + id + `"`, `"tool":"inbox_answer"`} {
		if !strings.Contains(got, want) {
			t.Fatalf("the TypeScript operator printed no %s:\n%s", want, got)
		}
	}

	clitest.WaitFor(t, "the task completed", func() bool { return d.lsByID()[id].Status == "completed" })
	if rec := d.getJSON(id); !strings.Contains(string(rec.raw["result"]), "approved deploy: from the inbox") {
		t.Fatalf("the result is %s", rec.raw["result"])
	}
	var answered []model.Actor
	for line := range strings.Lines(d.run("audit", "--json").Must(t, exitOK).Stdout) {
		var e model.AuditEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit --json printed %q: %v", line, err)
		}
		if e.Task == id && e.Act == model.ActAnswer {
			answered = append(answered, e.Actor)
		}
	}
	if len(answered) != 1 || answered[0].Name != "operator" || answered[0].Role != model.RoleOperator {
		t.Fatalf("the audit log names %+v as who answered; want the operator principal", answered)
	}
}

// startNodeScript starts node with args in dir (env added to this
// process's), in a process group of its own, its stdout piped; the
// caller waits for it and kills it (testproc.Signal) at its cleanup.
func startNodeScript(t *testing.T, dir string, env []string, args ...string) (*exec.Cmd, io.ReadCloser, *clitest.SyncBuf) {
	t.Helper()
	cmd := exec.Command("node", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stderr := &clitest.SyncBuf{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	testproc.Group(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdout, stderr
}
