package proxy

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/taskdeck/taskdeck/demo"
)

// The agent's own Mcp-Param-* headers (SEP-2243) are checked against the
// call's arguments, as the server would check them: a missing, different
// or unexpected header is refused with 400 and -32020, and nothing is
// recorded or sent; the right ones (base64 for non-ASCII) go through, and
// so does go-sdk's client, which sends them from the tool list.
func TestParamHeadersChecked(t *testing.T) {
	r := startRig(t, demo.Options{}, Options{})
	call := func(args string, hdr map[string]string) (int, answer) {
		t.Helper()
		h := map[string]string{"Mcp-Name": "deploy"}
		for k, v := range hdr {
			h[k] = v
		}
		return rpc(t, r.url, "tools/call", `{"name":"deploy","arguments":`+args+`,"_meta":`+metaJSON("a", true)+`}`, h)
	}
	b64 := func(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }
	both := `{"region":"eu-west-1","priority":3}`
	for _, c := range []struct {
		name, args string
		hdr        map[string]string
		says       string
	}{
		{"no headers", both, nil, `Mcp-Param-Priority is missing for the argument "priority"`},
		{"region missing", both, map[string]string{"Mcp-Param-Priority": "3"}, `Mcp-Param-Region is missing for the argument "region"`},
		{"priority missing", both, map[string]string{"Mcp-Param-Region": "eu-west-1"}, `Mcp-Param-Priority is missing`},
		{"region differs", both, map[string]string{"Mcp-Param-Region": "us-east-1", "Mcp-Param-Priority": "3"}, `Mcp-Param-Region differs`},
		{"priority differs", both, map[string]string{"Mcp-Param-Region": "eu-west-1", "Mcp-Param-Priority": "4"}, `Mcp-Param-Priority differs`},
		{"base64 of another", both, map[string]string{"Mcp-Param-Region": b64("us-east-1"), "Mcp-Param-Priority": "3"}, `Mcp-Param-Region differs`},
		{"broken base64", both, map[string]string{"Mcp-Param-Region": "=?base64?%%%?=", "Mcp-Param-Priority": "3"}, `not valid =?base64?`},
		{"header of an absent argument", `{"region":"eu-west-1"}`, map[string]string{"Mcp-Param-Region": "eu-west-1", "Mcp-Param-Priority": "0"}, `Mcp-Param-Priority is sent for the absent argument`},
	} {
		status, a := call(c.args, c.hdr)
		if status != http.StatusBadRequest || a.Error == nil || a.Error.Code != -32020 || !strings.Contains(a.Error.Message, c.says) || strings.Contains(a.Error.Message, "\n") {
			t.Errorf("%s: HTTP %d %+v; want 400, -32020 saying %q in one line", c.name, status, a.Error, c.says)
		}
	}
	if n := len(mustList(t, r)); n != 0 {
		t.Fatalf("refused calls left %d records", n)
	}
	if n := r.srv.Calls("deploy"); n != 0 {
		t.Fatalf("refused calls reached the server %d times", n)
	}

	for name, c := range map[string]struct {
		args string
		hdr  map[string]string
	}{
		"matching":                   {both, map[string]string{"Mcp-Param-Region": "eu-west-1", "Mcp-Param-Priority": "3"}},
		"non-ASCII in base64":        {`{"region":"zürich"}`, map[string]string{"Mcp-Param-Region": b64("zürich")}},
		"a header no argument names": {both, map[string]string{"Mcp-Param-Region": "eu-west-1", "Mcp-Param-Priority": "3", "Mcp-Param-Other": "x"}},
		"an agent before 2026-07-28": {both, map[string]string{"Mcp-Protocol-Version": "2025-11-25"}},
	} {
		if status, a := call(c.args, c.hdr); status != http.StatusOK || a.Error != nil || str(a.Result["resultType"]) != "task" {
			t.Errorf("%s: HTTP %d %+v %v; want the task", name, status, a.Error, a.Result)
		}
	}

	// go-sdk's client sends the headers of the tools it listed.
	cs := goClient(t, r.url, "go-agent")
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "deploy", Arguments: map[string]any{"region": "eu-west-1", "priority": 2}})
	if err != nil || res.IsError || !strings.Contains(text(t, res), "deployed to eu-west-1") {
		t.Fatalf("go-sdk's deploy through the proxy: %v %+v", err, res)
	}
}
