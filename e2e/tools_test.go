package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/taskdeck/taskdeck/demo"
	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/hostile"
)

// TestCallSendsParamHeaders: `taskdeck call` of a tool whose arguments
// carry x-mcp-header sends them as Mcp-Param-* headers (base64 for
// non-ASCII), and the server saw them; a call whose header goes missing
// on the way is refused by the server, and no task is made.
func TestCallSendsParamHeaders(t *testing.T) {
	t.Parallel()
	srv := hostile.Start(t, demo.Options{Speed: 0.05})
	d := newDeck(t)

	r := d.run("call", "--url", srv.URL, demo.HeaderTool, "--args", `{"region":"zürich","priority":3}`, "--wait", "--json").Must(t, 0)
	lines := jsonLines(t, r)
	encoded := "=?base64?" + base64.StdEncoding.EncodeToString([]byte("zürich")) + "?="
	want := "deployed to zürich at priority 3; headers seen: Mcp-Param-Region=" + encoded + " Mcp-Param-Priority=3"
	if last := lines[len(lines)-1]; last.Status != "completed" || last.resultText() != want {
		t.Fatalf("want completed with %q\n%s", want, r)
	}
	if lists := srv.Requests("tools/list"); len(lists) != 1 {
		t.Fatalf("one call listed the tools %d times, want once", len(lists))
	}
	calls := srv.Requests("tools/call")
	if len(calls) != 1 || calls[0].Header.Get("Mcp-Param-Region") != encoded || calls[0].Header.Get("Mcp-Param-Priority") != "3" {
		t.Fatalf("the server received %d tools/call, the first with %v", len(calls), calls[0].Header)
	}

	// The server's check is real: without the header the call is refused.
	srv.On("tools/call", func(_ http.ResponseWriter, req *hostile.Request) bool {
		req.HTTP.Header.Del("Mcp-Param-Region")
		return false
	})
	r = d.run("call", "--url", srv.URL, demo.HeaderTool, "--args", `{"region":"eu-west-1"}`)
	if r.Code == 0 {
		t.Fatalf("a call without its header went through\n%s", r)
	}
	clitest.OneErrorLine(t, r, "-32020", "Mcp-Param-Region")
	if created := srv.Demo.Stats().TasksCreated; created != 1 {
		t.Fatalf("%d tasks created, want only the first", created)
	}
}

// sameJSON compares two JSON texts token by token: the same values in the
// same order, whatever the spacing or escapes.
func sameJSON(a, b []byte) bool {
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	for {
		ta, ea := da.Token()
		tb, eb := db.Token()
		if ea != nil || eb != nil {
			return errors.Is(ea, io.EOF) && errors.Is(eb, io.EOF)
		}
		if ta != tb {
			return false
		}
	}
}

// TestToolsJSON: `tools --json` prints each tool exactly as the server
// sent it (every field, in the server's order), one per line, inert.
func TestToolsJSON(t *testing.T) {
	t.Parallel()
	srv := hostile.Start(t, demo.Options{Speed: 0.05, Hostile: true})
	var mu sync.Mutex
	var sent []json.RawMessage
	srv.On("tools/list", func(w http.ResponseWriter, req *hostile.Request) bool {
		rec := srv.Upstream(req)
		body := rec.Body.Bytes()
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
			for line := range strings.Lines(string(body)) {
				if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data:"); ok {
					body = []byte(d)
				}
			}
		}
		var msg struct {
			Result struct {
				Tools []json.RawMessage `json:"tools"`
			} `json:"result"`
		}
		if err := json.Unmarshal(body, &msg); err != nil {
			t.Errorf("tools/list answer: %v", err)
		}
		mu.Lock()
		sent = msg.Result.Tools
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
		return true
	})
	d := newDeck(t)
	r := d.run("tools", "--url", srv.URL, "--json").Must(t, 0)
	inertText(t, r, "JSON stdout", r.Stdout)
	got := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(sent) || len(sent) < 9 {
		t.Fatalf("%d lines for the %d tools the server sent\n%s", len(got), len(sent), r)
	}
	for i, line := range got {
		if !sameJSON([]byte(line), sent[i]) {
			t.Fatalf("line %d is not the tool as sent:\n got %s\nwant %s", i+1, line, sent[i])
		}
	}
}

// TestToolArguments: `tools SERVER TOOL` shows one tool's arguments with
// type, required, default, enum, range, format, header and description,
// server text made inert; an unknown tool names the close ones (exit 2).
func TestToolArguments(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0", "--hostile")
	d := newDeck(t)
	d.writeConfig(`{"mcpServers": {"demo": {"url": "` + srv.url + `"}}}`)

	r := d.run("tools", "demo", "pipeline").Must(t, 0)
	clitest.MustContain(t, r, r.Stdout, "pipeline: A multi-stage job",
		"  stages  integer, optional, default 3, 1 to 20: how many stages to run\n")
	r = d.run("tools", "--url", srv.url, "fail").Must(t, 0)
	clitest.MustContain(t, r, r.Stdout, `  mode  string, required, one of "error", "tool": error: the task fails`)
	r = d.run("tools", "--url", srv.url, demo.HeaderTool).Must(t, 0)
	clitest.MustContain(t, r, r.Stdout, "  region    string, required, length at least 1, header Mcp-Param-Region: where to deploy",
		"  priority  integer, optional, 0 to 9, header Mcp-Param-Priority: ")
	r = d.run("tools", "--url", srv.url, "survey").Must(t, 0)
	clitest.MustContain(t, r, r.Stdout, "survey: Asks two questions", "(no arguments)")

	r = d.run("tools", "--url", srv.url, demo.HostileTool).Must(t, 0)
	inertPlain(t, r)
	clitest.MustContain(t, r, r.Stdout, hostileWords, `one of "result", "error"`)

	r = d.run("tools", "--url", srv.url, "slep").Must(t, exitUsage)
	clitest.OneErrorLine(t, r, `"slep"`, "sleep")
}

// TestCallChecksArguments: `call` checks --args and the tool's name
// against the server's tool list before anything is written or sent:
// a mistake is one line naming the argument and what it needs (exit 2),
// and the store and the server hold nothing of it.
func TestCallChecksArguments(t *testing.T) {
	t.Parallel()
	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	for _, c := range []struct {
		tool, args string
		want       []string
	}{
		{"sleep", `{"seconds":"x"}`, []string{"seconds", "number"}},
		{"approve", `{}`, []string{"action", "required"}},
		{"pipeline", `{"stages":99}`, []string{"stages", "20"}},
		{"fail", `{"mode":"boom"}`, []string{"mode", `"error"`, `"tool"`}},
		{"slep", `{}`, []string{`"slep"`, "sleep"}},
	} {
		r := d.run("call", "--url", srv.url, c.tool, "--args", c.args).Must(t, exitUsage)
		clitest.OneErrorLine(t, r, c.want...)
	}
	if tasks := d.ls(); len(tasks) != 0 {
		t.Fatalf("refused calls left %d records: %+v", len(tasks), tasks)
	}
	if st := srv.stats(t); len(st.ToolCalls) != 0 || st.TasksCreated != 0 {
		t.Fatalf("refused calls reached the server: %+v", st)
	}
	// A good call still goes through.
	id := clitest.OnlyID(t, d.run("call", "--url", srv.url, "sleep", "--args", `{"seconds":1}`).Must(t, 0))
	d.waitStatus(id, "completed")
}

// TestCallCheckNeedsNoMoreThanTheCall: the check before a call asks for
// nothing the call itself does not need: a server whose tools/list fails
// still gets the call (unchecked), and a key that already names a task is
// answered from the store while the server is down.
func TestCallCheckNeedsNoMoreThanTheCall(t *testing.T) {
	t.Parallel()
	srv := hostile.Start(t, demo.Options{Speed: 0.05})
	srv.On("tools/list", func(w http.ResponseWriter, req *hostile.Request) bool {
		http.Error(w, "tools/list is down", http.StatusInternalServerError)
		return true
	})
	d := newDeck(t)
	id := clitest.OnlyID(t, d.run("call", "--url", srv.URL, "sleep", "--args", `{"seconds":1}`).Must(t, 0))
	if calls := srv.Requests("tools/call"); len(calls) != 1 {
		t.Fatalf("the call was not sent when tools/list failed: %d tools/call", len(calls))
	}
	d.waitStatus(id, "completed")

	demoSrv := startDemo(t, "127.0.0.1:0")
	first := clitest.OnlyID(t, d.run("call", "--url", demoSrv.url, "sleep", "--args", `{"seconds":1}`, "--key", "once").Must(t, 0))
	demoSrv.p.kill()
	r := d.run("call", "--url", demoSrv.url, "sleep", "--args", `{"seconds":1}`, "--key", "once").Must(t, 0)
	if clitest.OnlyID(t, r) != first || !strings.Contains(r.Stderr, "nothing new was sent") {
		t.Fatalf("a known key needed the server\n%s", r)
	}
}

// richTool is a tool whose input schema uses what the tools list of a
// real server may: nested objects, lists, exclusive bounds, formats,
// titled choices and nullable types.
const richTool = `{"name":"rich","description":"A tool of every shape.","inputSchema":{"type":"object",
 "properties":{
  "target":{"type":"object","description":"where to","properties":{
    "host":{"type":"string","format":"hostname","description":"the host"},
    "port":{"type":"integer","minimum":1,"maximum":65535}},"required":["host"]},
  "tags":{"type":"array","items":{"type":"string"},"minItems":1,"description":"labels"},
  "ratio":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1},
  "share":{"type":"number","minimum":0,"exclusiveMaximum":1},
  "level":{"anyOf":[{"type":"string"},{"type":"integer"}]},
  "when":{"type":["string","null"],"format":"date-time"},
  "size":{"type":"string","oneOf":[{"const":"s","title":"Small"},{"const":"l","title":"Large"}]}},
 "required":["target"]}}`

// TestToolOfAnyShape: a tool whose schema nests objects and lists is
// shown argument by argument, and call names the nested argument that is
// wrong.
func TestToolOfAnyShape(t *testing.T) {
	t.Parallel()
	srv := hostile.Start(t, demo.Options{Speed: 0.05})
	var tool map[string]any
	if err := json.Unmarshal([]byte(richTool), &tool); err != nil {
		t.Fatal(err)
	}
	srv.On("tools/list", srv.Rewrite(hostile.Tree(func(res map[string]any) {
		res["tools"] = append(res["tools"].([]any), tool)
	})))
	d := newDeck(t)
	r := d.run("tools", "--url", srv.URL, "rich").Must(t, 0)
	want := "rich: A tool of every shape.\n" +
		"  target       object, required: where to\n" +
		"  target.host  string, required, format hostname: the host\n" +
		"  target.port  integer, optional, 1 to 65535\n" +
		"  level        string or integer, optional\n" +
		"  ratio        number, optional, more than 0, less than 1\n" +
		"  share        number, optional, at least 0, less than 1\n" +
		"  size         string, optional, one of \"s\", \"l\"\n" +
		"  tags         list of string, optional, items at least 1: labels\n" +
		"  when         string or null, optional, format date-time\n"
	if r.Stdout != want {
		t.Fatalf("got\n%s\nwant\n%s", r.Stdout, want)
	}
	for _, c := range []struct{ args, want string }{
		{`{"target":{"host":"a","port":70000}}`, "target.port: want integer, optional, 1 to 65535; got 70000"},
		{`{"target":{}}`, "target.host is missing: want string, required, format hostname"},
		{`{"target":{"host":"a"},"tags":[]}`, "tags: want list of string"},
		{`{"target":{"host":"a"},"tags":["a",1]}`, `tags: want list of string, optional, items at least 1; got ["a",1]`},
		{`{"target":{"host":"a"},"level":1.5}`, "level: want string or integer, optional; got 1.5"},
		{`{"target":{"host":"a"},"ratio":1}`, "ratio: want number, optional, more than 0, less than 1; got 1"},
	} {
		r := d.run("call", "--url", srv.URL, "rich", "--args", c.args).Must(t, exitUsage)
		clitest.OneErrorLine(t, r, c.want)
	}
	if calls := srv.Requests("tools/call"); len(calls) != 0 {
		t.Fatalf("refused calls were sent: %d", len(calls))
	}
}

// TestToolsListCursorLoop: a server whose tools/list hands back the same
// cursor for ever is listed once per cursor, not for ever.
func TestToolsListCursorLoop(t *testing.T) {
	t.Parallel()
	srv := hostile.Start(t, demo.Options{Speed: 0.05})
	again := srv.Rewrite(hostile.Tree(func(res map[string]any) { res["nextCursor"] = "again" }))
	srv.On("tools/list", func(w http.ResponseWriter, req *hostile.Request) bool {
		// The demo knows no cursors: it is asked for the first page each time.
		var msg map[string]any
		if err := json.Unmarshal(req.Body, &msg); err != nil {
			t.Errorf("tools/list body: %v", err)
		}
		delete(msg["params"].(map[string]any), "cursor")
		req.Body, _ = json.Marshal(msg)
		return again(w, req)
	})
	d := newDeck(t)
	r := d.run("tools", "--url", srv.URL).Must(t, 0)
	clitest.MustContain(t, r, r.Stdout, "sleep ")
	if n := len(srv.Requests("tools/list")); n != 2 {
		t.Fatalf("tools/list sent %d times, want 2 (the first page, then the cursor once)", n)
	}
}
