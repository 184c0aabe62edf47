package ui

import (
	"context"

	tea "charm.land/bubbletea/v2"
)

// Run shows the dashboard until the operator quits. Commands still in
// flight when it returns, and the feed it watches, end through ctx.
func Run(ctx context.Context, opts Options, programOpts ...tea.ProgramOption) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := New(ctx, opts)
	m.feed.start() // the snapshot is read while the terminal is set up
	p := tea.NewProgram(m, append([]tea.ProgramOption{tea.WithContext(ctx)}, programOpts...)...)
	_, err := p.Run()
	return err
}
