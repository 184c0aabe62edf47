package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/taskdeck/taskdeck/internal/version"
)

// newCmdVersion prints what `taskdeck --version` prints: the word as
// well as the flag, as gh and kubectl take both.
func newCmdVersion(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print taskdeck's version, the commit it was built from and its Go",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(f.stdout, version.Line())
			return err
		},
	}
}
