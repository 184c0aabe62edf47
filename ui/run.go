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
	m := New(ctx, opts)
	m.load = prefetch(m.load)
	p := tea.NewProgram(m, append([]tea.ProgramOption{tea.WithContext(ctx)}, programOpts...)...)
	_, err := p.Run()
	return err
}

// prefetch starts cmd at once and returns a command that waits for its
// message: the store is read for the first frame while the terminal is
// set up, not after.
func prefetch(cmd tea.Cmd) tea.Cmd {
	msg := make(chan tea.Msg, 1)
	go func() { msg <- cmd() }()
	return func() tea.Msg { return <-msg }
}
