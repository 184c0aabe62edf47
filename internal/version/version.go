// Package version says which taskdeck a binary is, from what the Go
// toolchain recorded in it: the module's version when it was installed
// with `go install …@vX`, the commit of the checkout it was built from
// otherwise, and the Go that built it.
package version

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// untagged is the version of a build from a checkout that no tag names,
// or one whose build recorded none (`go run`, -buildvcs=false).
const untagged = "0.1.0"

// Number is the version alone, as taskdeck names itself to the servers
// and agents it talks to (clientInfo, serverInfo).
func Number() string {
	bi, _ := debug.ReadBuildInfo()
	return number(bi)
}

// Line is what `taskdeck --version` prints, e.g. "taskdeck 0.1.0 (commit
// 7733b33c0a5e, committed 2026-12-04T12:40:11Z, go1.26.8)": a bug report needs the
// commit, and whether the tree had changes beyond it ("+changes").
func Line() string {
	bi, _ := debug.ReadBuildInfo()
	return line(bi)
}

func number(bi *debug.BuildInfo) string {
	if bi == nil {
		return untagged
	}
	v := bi.Main.Version
	// A checkout's build names itself by a pseudo-version made of the
	// commit (v0.0.0-20261204133314-fd7fb247fb9b), which Line says better.
	if rev := setting(bi, "vcs.revision"); v == "" || v == "(devel)" || rev != "" && strings.Contains(v, rev[:min(len(rev), 12)]) {
		return untagged
	}
	return strings.TrimPrefix(v, "v")
}

func line(bi *debug.BuildInfo) string {
	if bi == nil {
		return "taskdeck " + untagged
	}
	var about []string
	if rev := setting(bi, "vcs.revision"); rev != "" {
		rev = rev[:min(len(rev), 12)]
		if setting(bi, "vcs.modified") == "true" {
			rev += "+changes"
		}
		about = append(about, "commit "+rev)
	}
	if at := setting(bi, "vcs.time"); at != "" {
		about = append(about, "committed "+at)
	}
	about = append(about, bi.GoVersion)
	return fmt.Sprintf("taskdeck %s (%s)", number(bi), strings.Join(about, ", "))
}

func setting(bi *debug.BuildInfo, key string) string {
	for _, s := range bi.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}
