package version

import (
	"runtime/debug"
	"testing"
)

func TestLine(t *testing.T) {
	vcs := func(rev, at, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: at}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "fd7fb247fb9b5d6c1a2b3c4d5e6f708192a3b4c5"
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "taskdeck 0.1.0"},
		{"go run, no VCS", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "taskdeck 0.1.0 (go1.26.8)"},
		{"a checkout with changes", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main:     debug.Module{Version: "v0.0.0-20261204133314-fd7fb247fb9b+dirty"},
			Settings: vcs(rev, "2026-12-04T13:33:14Z", "true")},
			"taskdeck 0.1.0 (commit fd7fb247fb9b+changes, committed 2026-12-04T13:33:14Z, go1.26.8)"},
		{"a tagged checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"},
			Settings: vcs(rev, "2026-12-04T13:33:14Z", "false")},
			"taskdeck 1.2.0 (commit fd7fb247fb9b, committed 2026-12-04T13:33:14Z, go1.26.8)"},
		{"go install of a tag", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}}, "taskdeck 1.2.0 (go1.26.8)"},
		{"go install of a commit", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261204133314-fd7fb247fb9b"}},
			"taskdeck 0.0.0-20261204133314-fd7fb247fb9b (go1.26.8)"},
	} {
		if got := line(c.bi); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}
