package ui

import (
	"context"

	tea "charm.land/bubbletea/v2"
)

// Run shows the dashboard until the operator quits. Commands still in
// flight when it returns are cancelled through ctx.
func Run(ctx context.Context, opts Options, programOpts ...tea.ProgramOption) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := tea.NewProgram(New(ctx, opts), append([]tea.ProgramOption{tea.WithContext(ctx)}, programOpts...)...)
	_, err := p.Run()
	return err
}
