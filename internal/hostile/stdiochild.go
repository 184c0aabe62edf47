package hostile

import (
	"context"
	"os"
	"time"

	"github.com/taskdeck/taskdeck/demo"
)

// StdioChildEnv is the variable that, set to "1" in a test binary's
// environment, makes it a
// demo server on stdin and stdout: stdio tests start the test binary
// itself as a real child process speaking MCP (see ServeStdioChild).
const StdioChildEnv = "TASKDECK_TEST_STDIO_DEMO"

// ServeStdioChild is the first line of such a test binary's TestMain: when
// started as the child, it serves the demo (fast, polled every 20 ms) and
// exits; otherwise it returns at once.
func ServeStdioChild() {
	if os.Getenv(StdioChildEnv) != "1" {
		return
	}
	srv := demo.New(demo.Options{Speed: 0.05, PollInterval: 20 * time.Millisecond})
	srv.ServeStdio(context.Background(), os.Stdin, os.Stdout)
	srv.Close()
	os.Exit(0)
}
