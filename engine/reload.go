package engine

import (
	"os"
	"slices"
	"sync"

	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

// An owner runs for days while its operator edits the config file
// (issue 25, item 1). With Options.FollowConfig the engine reads the file
// again whenever a request that names servers (Servers, Call, Tools)
// finds it changed since the version in use: a stat per such
// request, no watcher. That is chosen over a file watch (fsnotify) for
// two reasons: editors save by renaming a new file over the old, which
// a watch on the file loses and a stat sees; and every command sees the
// file as it is when it runs, which a watch's event, arriving a little
// later, would not promise.

// followedConfig is the config file an engine follows.
type followedConfig struct {
	mu   sync.Mutex
	path string
	seen fileStamp
	cfg  *mcpconfig.Config
	// refused is the error of the newest version on disk, nil once a
	// version is in use: the previous one stays in use meanwhile.
	refused error
}

// fileStamp tells one version of a file from another without reading it:
// its size, its modification time, and which file it is (an editor's
// rename puts another file there).
type fileStamp struct {
	fi os.FileInfo // nil: no file
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{fi}
}

func (a fileStamp) same(b fileStamp) bool {
	if a.fi == nil || b.fi == nil {
		return a.fi == nil && b.fi == nil
	}
	return os.SameFile(a.fi, b.fi) && a.fi.Size() == b.fi.Size() && a.fi.ModTime().Equal(b.fi.ModTime())
}

func newFollowedConfig(cfg *mcpconfig.Config) *followedConfig {
	f := &followedConfig{cfg: cfg}
	if cfg != nil && cfg.Path() != "" {
		f.path = cfg.Path()
		f.seen = stampOf(f.path)
	}
	return f
}

// config is the config in use (nil when the engine was given none).
func (e *Engine) config() *mcpconfig.Config {
	f := e.cfg
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cfg
}

// refreshConfig reads the followed file again if it changed, and puts a
// version that parses in use; it returns the refusal of the version on
// disk, if it has one.
func (e *Engine) refreshConfig() error {
	f := e.cfg
	if !e.opts.FollowConfig || f.path == "" {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := stampOf(f.path)
	if now.same(f.seen) {
		return f.refused
	}
	f.seen = now
	cfg, err := mcpconfig.LoadConfig(f.path)
	if err != nil {
		f.refused = err
		e.log.Warn("the config file changed and is refused; the version read before stays in use", "config", f.path, "err", err)
		return err
	}
	f.refused = nil
	before, after := f.cfg.Names(), cfg.Names()
	f.cfg = cfg
	e.pool.SetConfig(cfg)
	e.wakeDeadlines() // its deadlines may differ
	e.log.Info("config reloaded", "config", f.path, "servers", after, "added", missing(after, before), "removed", missing(before, after))
	// The servers' edit stands even where the endpoints' is refused: the
	// log says so, and notify status shows the endpoints still in use.
	if changed, err := e.notifier.reload(cfg.Notify); err != nil {
		e.log.Warn("the config's notify edit is refused; the endpoints read before stay in use", "config", f.path, "err", err)
	} else if changed {
		e.log.Info("notify reloaded", "config", f.path, "webhooks", len(cfg.Notify.Webhooks), "commands", len(cfg.Notify.Commands))
	}
	return nil
}

// missing is the names of a not in b.
func missing(a, b []string) []string {
	return slices.DeleteFunc(slices.Clone(a), func(n string) bool { return slices.Contains(b, n) })
}

// refreshFor is refreshConfig for a request that names server: a refused
// version is its error only where the version in use lacks the server,
// so that calls to the others go on while the file is being edited.
func (e *Engine) refreshFor(server model.ServerRef) error {
	err := e.refreshConfig()
	if err == nil || server.Name == "" {
		return nil
	}
	if _, in := e.config().Server(server.Name); in != nil {
		return classify(err, "")
	}
	return nil
}
