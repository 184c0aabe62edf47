package cli

import (
	"context"
	"os"
	"path/filepath"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/termtext"
	"github.com/taskdeck/taskdeck/ui"
	"golang.org/x/term"
)

// dashboard opens the terminal UI on the store and config.
func (f *Factory) dashboard(ctx context.Context, greeting string) error {
	return f.dashboardAfter(ctx, greeting, nil)
}

// dashboardAfter opens the Deck on the store and config, lets first
// act on it (the demo launches its tasks), then shows the dashboard on it
// until the operator quits.
func (f *Factory) dashboardAfter(ctx context.Context, greeting string, first func(context.Context, deck.Deck) error) error {
	if err := f.needTerminal(); err != nil {
		return err
	}
	look, err := f.dashboardConfig()
	if err != nil {
		return err
	}
	f.quiet = true // from here on, only the renderer writes to the terminal
	f.retention = true
	notices := make(chan string, 1)
	f.notices = notices
	dk, err := f.deck(ctx)
	if err != nil {
		return err
	}
	if first != nil {
		if err := first(ctx, dk); err != nil {
			return err
		}
	}
	if f.readOnly {
		// The deck refuses a viewer's changes too, not only the keys.
		ctx = deck.WithActor(ctx, model.Actor{Name: deck.LocalUser().Name, Role: model.RoleViewer})
		greeting = "read-only · " + greeting
	}
	return ui.Run(ctx, ui.Options{Deck: dk, Notify: notificationsSupported(), Desktop: termtext.DesktopNotification(os.Getenv), Greeting: greeting,
		Config: look, SearchHistory: filepath.Join(f.dataDir, "search-history"), ReadOnly: f.readOnly, Notices: notices})
}

// dashboardConfig reads the config file's "dashboard" section (keys,
// colours, mouse). Only a regular file is read (config has refused
// anything else where it matters); none is the default look.
func (f *Factory) dashboardConfig() (*ui.Config, error) {
	if fi, err := os.Stat(f.configPath); err != nil || !fi.Mode().IsRegular() {
		return ui.DefaultConfig(), nil
	}
	data, err := os.ReadFile(f.configPath)
	if err != nil {
		return ui.DefaultConfig(), nil // config said what was wrong with the file, where it matters
	}
	look, err := ui.ParseConfig(data)
	if err != nil {
		return nil, &exitError{code: exitUsage, err: &config.ConfigError{Path: f.configPath, Msg: err.Error()}}
	}
	return look, nil
}

// needTerminal refuses to start the dashboard where it cannot draw or
// read keys: stdout must be a terminal, and so must stdin or /dev/tty.
func (f *Factory) needTerminal() error {
	if out, ok := f.stdout.(*os.File); ok && term.IsTerminal(int(out.Fd())) {
		if f.canPrompt {
			return nil
		}
		if tty, err := os.Open("/dev/tty"); err == nil {
			tty.Close()
			return nil
		}
	}
	return usageErr("the dashboard needs a terminal; without one use `taskdeck ls`, `taskdeck watch` or `taskdeck call --wait`")
}

// notificationsSupported reports terminals known to show OSC 9 desktop
// notifications; others get only the bell.
func notificationsSupported() bool {
	switch os.Getenv("TERM_PROGRAM") {
	case "iTerm.app", "WezTerm", "ghostty":
		return true
	}
	return false
}
