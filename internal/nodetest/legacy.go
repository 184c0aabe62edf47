package nodetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Legacy is the 2025-11-25 servers of testdata/legacy, installed once:
// @modelcontextprotocol/server-everything and a server on the TypeScript
// SDK 1.x's task store (sdk-server.mjs); and an agent on the SDK 1.x's
// client (sdk-client.mjs).
type Legacy struct{ Dir string }

// LegacyServers installs them.
func LegacyServers(t testing.TB) Legacy {
	t.Helper()
	return Legacy{Dir: Install(t, filepath.Join(testdataDir(), "legacy"), "listen.cjs", "sdk-server.mjs", "sdk-client.mjs")}
}

func testdataDir() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "testdata")
}

// Everything is server-everything's program (its argument: stdio or
// streamableHttp).
func (l Legacy) Everything() string {
	return filepath.Join(l.Dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
}

// SDKClient is a 2025-11-25 agent on the TypeScript SDK 1.x's client
// and its experimental tasks API (arguments: URL TOOL ARGS_JSON).
func (l Legacy) SDKClient() string { return filepath.Join(l.Dir, "sdk-client.mjs") }

// SDKServer is the TypeScript SDK 1.x server's program (stdio).
func (l Legacy) SDKServer() string { return filepath.Join(l.Dir, "sdk-server.mjs") }

// ServeEverything starts server-everything's streamable HTTP transport
// bound to loopback, on port (any when "0"), and returns its URL and
// process, which is killed (by its pid) at cleanup.
func (l Legacy) ServeEverything(t testing.TB, port string) (string, *exec.Cmd) {
	t.Helper()
	return l.serve(t, port, "server-everything", l.Everything(), "streamableHttp")
}

// ServeSDK starts the TypeScript SDK 1.x server over streamable HTTP
// without sessions (its tasks outlive the client that made them) bound
// to loopback, on port (any when "0"), and returns its URL and process,
// which is killed (by its pid) at cleanup.
func (l Legacy) ServeSDK(t testing.TB, port string) (string, *exec.Cmd) {
	t.Helper()
	return l.serve(t, port, "the SDK 1.x server", l.SDKServer(), "http")
}

func (l Legacy) serve(t testing.TB, port, what string, program ...string) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command("node", append([]string{"--require", filepath.Join(testdataDir(), "conformance", "loopback.cjs"),
		"--require", filepath.Join(l.Dir, "listen.cjs")}, program...)...)
	cmd.Env = append(os.Environ(), "PORT="+port)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := startListening(t, cmd, stderr, "taskdeck-test-listening ", what)
	return "http://127.0.0.1:" + p + "/mcp", cmd
}
