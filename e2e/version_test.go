package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// TestVersion: `taskdeck --version` and `taskdeck version` print one line
// naming the Go that built the binary and, when the build recorded it, the
// commit, as `go version -m` reads them from the same binary.
func TestVersion(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "version", "-m", tdBin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	info := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && f[0] == "build" {
			k, v, _ := strings.Cut(f[1], "=")
			info[k] = v
		}
	}
	goVersion := strings.Fields(strings.SplitN(string(out), "\n", 2)[0])[1] // "<path>: go1.x"
	want := []string{"taskdeck ", goVersion}
	if rev := info["vcs.revision"]; rev != "" {
		commit := "commit " + rev[:12]
		if info["vcs.modified"] == "true" {
			commit += "+changes"
		}
		want = append(want, commit)
	}
	env := testEnv(t)
	flag, word := runTD(t, env, "--version"), runTD(t, env, "version")
	for _, r := range []struct {
		how string
		got string
	}{{"--version", flag.Stdout}, {"version", word.Stdout}} {
		if strings.Count(r.got, "\n") != 1 || !strings.HasPrefix(r.got, "taskdeck ") {
			t.Fatalf("taskdeck %s printed %q, want one line that starts with \"taskdeck \"", r.how, r.got)
		}
		for _, w := range want {
			if !strings.Contains(r.got, w) {
				t.Errorf("taskdeck %s printed %q, want %q in it (go version -m: %v)", r.how, r.got, w, info)
			}
		}
	}
	if flag.Code != exitOK || word.Code != exitOK || flag.Stderr != "" || word.Stderr != "" || flag.Stdout != word.Stdout {
		t.Fatalf("want both to exit 0 with the same line and nothing on stderr:\n%s\n%s", flag, word)
	}
}
