package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/testproc"
)

// TestAnotherUserIsRefused: while `taskdeck serve` owns a store, another
// user's `taskdeck ls` on that data directory is refused, by the
// permissions, with one error line; the owner serves its own user on.
func TestAnotherUserIsRefused(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root to run taskdeck as another user (uid 65534)")
	}
	const nobody = 65534
	top, bin, home := otherUserTree(t, "tdother-")

	d, _ := tuiDeck(t)
	d.dataDir = filepath.Join(top, "data")
	owner := d.serve()
	defer owner.kill()
	d.call("sleep", `{"seconds":600}`)

	asNobody := func() clitest.Result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), clitest.CmdTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "--data-dir", d.dataDir, "ls")
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		testproc.Group(cmd)
		cmd.Cancel = testproc.Kill(cmd)
		testproc.Group(cmd)
		cmd.Cancel = testproc.Kill(cmd)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Run()
		return clitest.Result{Args: cmd.Args, Stdout: stdout.String(), Stderr: stderr.String(), Code: cmd.ProcessState.ExitCode()}
	}
	refused := func(r clitest.Result) {
		t.Helper()
		if r.Code != exitLocal {
			t.Fatalf("another user on the store: want exit %d\n%s", exitLocal, r)
		}
		clitest.OneErrorLine(t, r, "belongs to uid 0, not to you", "choose your own --data-dir")
		t.Logf("as nobody: exit %d, %s", r.Code, strings.TrimSpace(r.Stderr))
	}
	refused(asNobody())
	// Opened up (as a careless chmod would), still not served: the
	// directory is not its, and the socket checks its peer (service's
	// TestOtherUserRefused).
	os.Chmod(d.dataDir, 0o755)
	os.Chmod(filepath.Join(d.dataDir, "taskdeck.sock"), 0o666)
	refused(asNobody())
	if n := len(d.ls()); n != 1 {
		t.Fatalf("the owner's user lists %d records after the refusal, want 1", n)
	}
	if owner.exited() {
		t.Fatalf("serve ended: %s", owner.Stderr.String())
	}
}

func copyExecutable(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestProxyRefusesAnotherUser: root's `serve --proxy` on loopback; uid
// nobody points its own taskdeck at the proxy's endpoint (it has no
// agent's token): the call is refused (401 Unauthorized), nothing reaches the
// server, and no record is made in root's store.
func TestProxyRefusesAnotherUser(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root to run taskdeck as another user (uid 65534)")
	}
	const nobody = 65534
	_, bin, home := otherUserTree(t, "tdproxyother-")

	srv := startDemo(t, "127.0.0.1:0")
	d := newDeck(t)
	d.writeConfig(fmt.Sprintf(`{"mcpServers":{"build":{"url":%q}},"agents":{"ci":{"token":"${CI_TOKEN}","servers":["build"]}}}`, srv.url))
	d.env = append(d.env, "CI_TOKEN=ci-agent-token-0123456789abcdef")
	owner, base := d.serveProxy()

	ctx, cancel := context.WithTimeout(context.Background(), clitest.CmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--data-dir", filepath.Join(home, "data"), "call", "--url", base+"/mcp/build", "sleep", "--args", `{"seconds":1}`)
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	testproc.Group(cmd)
	cmd.Cancel = testproc.Kill(cmd)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run()
	r := clitest.Result{Args: cmd.Args, Stdout: stdout.String(), Stderr: stderr.String(), Code: cmd.ProcessState.ExitCode()}
	if r.Code != exitUnreachable {
		t.Fatalf("nobody's call through root's proxy: want exit %d\n%s", exitUnreachable, r)
	}
	clitest.OneErrorLine(t, r, "Unauthorized")
	if st := srv.stats(t); len(st.ToolCalls) != 0 || st.TasksCreated != 0 {
		t.Fatalf("the server saw calls %v, %d tasks", st.ToolCalls, st.TasksCreated)
	}
	t.Logf("as nobody: exit %d, %s", r.Code, strings.TrimSpace(r.Stderr))
	if n := len(d.ls()); n != 0 {
		t.Fatalf("root's store holds %d records after nobody's call", n)
	}
	if owner.exited() {
		t.Fatalf("serve ended: %s", owner.Stderr.String())
	}
}

// otherUserTree is a tree another user may traverse, with a copy of the
// binary it may run and a home it may write in.
func otherUserTree(t *testing.T, prefix string) (top, bin, home string) {
	t.Helper()
	top, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	os.Chmod(top, 0o755)
	bin = filepath.Join(top, "taskdeck")
	copyExecutable(t, tdBin, bin)
	home = filepath.Join(top, "home")
	if err := os.Mkdir(home, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(home, 0o777)
	return top, bin, home
}
