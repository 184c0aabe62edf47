// Command taskdeck keeps durable track of long-running MCP tool calls.
package main

import (
	_ "github.com/dgraph-io/badger/v4"
	_ "github.com/spf13/cobra"
)

func main() {}
