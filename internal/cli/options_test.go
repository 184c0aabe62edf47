package cli

import (
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// TestUsageErrorsOpenNothing: every usage error is found when the flags
// become options, before anything opens: the data directory (log, store)
// is never created, and the error is one line with exit 2 (a wrong count
// of arguments too).
func TestUsageErrorsOpenNothing(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"call", "--url", "http://127.0.0.1:1/mcp", "echo", "--args", `[1]`},
		{"call", "--url", "http://127.0.0.1:1/mcp", "echo", "--input", "no-equals-sign"},
		{"call", "--url", "http://127.0.0.1:1/mcp", "echo", "--input", "k={bad"},
		{"call", "--url", "http://u:p@127.0.0.1:1/mcp", "echo"},
		{"ls", "--status", "bogus"},
		{"answer", "someid", "approve-1", "{not json"},
		{"watch", "--timeout", "-1s"},
		{"watch", "--notify", "--json"},
		{"tools", "one", "two", "three"},
		{"prune", "--older-than", "3 days"},
		{"get"},
		{"forget"},
		{"cancel", "someid", "--status", "open"},
		{"rerun", "--status", "bogus"},
		{"bogus-command"},
	} {
		c := newInproc(t)
		r := c.run(args...).Must(t, exitUsage)
		clitest.OneErrorLine(t, r)
		if _, err := os.Stat(c.dataDir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("taskdeck %v: the data directory was opened before the usage error (%v)", args, err)
		}
	}
}

// TestCallOptions: `call`'s flags become validated options: the server,
// the arguments, and the --input answers by key.
func TestCallOptions(t *testing.T) {
	t.Parallel()
	var got *CallOptions
	cmd := newCmdCall(NewFactory(nil, nil, nil), func(o *CallOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--url", "http://127.0.0.1:1/mcp", "approve", "--args", `{"action":"x"}`,
		"--key", "k1", "--input", `approve-1={"action":"accept"}`, "--wait", "--json"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Server.URL != "http://127.0.0.1:1/mcp" || got.Tool != "approve" || string(got.Args) != `{"action":"x"}` ||
		got.Key != "k1" || string(got.Answers["approve-1"]) != `{"action":"accept"}` || !got.Wait || !got.JSON {
		t.Fatalf("options: %+v", got)
	}
}
