// Command taskdeck keeps durable track of long-running MCP tool calls:
// every task handle is synced to a local store before anything else
// happens, so no task is ever orphaned by a crash or a restart.
package main

import (
	"os"

	"github.com/taskdeck/taskdeck/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
