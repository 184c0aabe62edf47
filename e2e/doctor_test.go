package e2e

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/internal/clitest"
	"github.com/taskdeck/taskdeck/internal/testproc"
	"github.com/taskdeck/taskdeck/internal/waitfor"
)

// TestDoctorGoSDKEverythingServer: doctor against go-sdk's own example
// "everything" server (built from the go-sdk module taskdeck requires, so
// nobody here wrote it), which speaks 2025-11-25 and offers tools but no
// tasks: it is reached, doctor says what that breaks with its remedy, and
// exits 1.
func TestDoctorGoSDKEverythingServer(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "everything")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/modelcontextprotocol/go-sdk/examples/server/everything").CombinedOutput(); err != nil {
		t.Fatalf("build go-sdk's everything server: %v\n%s", err, out)
	}
	// Its MCP handler answers nothing to a bare GET; its pprof listener,
	// started first, says the process is up.
	addrs := testproc.ServeOnPorts(t, 2, "go-sdk everything server", func(addrs []string) (*exec.Cmd, string) {
		return exec.Command(bin, "-http", addrs[0], "-pprof", addrs[1]), "http://" + addrs[1] + "/debug/pprof/"
	})
	mcpAddr := addrs[0]
	waitfor.Within(t, 10*time.Second, "the everything server's MCP address", func() bool {
		c, err := net.Dial("tcp", mcpAddr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	d := newDeck(t)
	r := d.run("doctor", "--url", fmt.Sprintf("http://%s/", mcpAddr)).Must(t, exitTaskBad)
	clitest.MustContain(t, r, r.Stdout, "(everything)", "revision      2025-11-25", "tasks         not offered", "offers no tasks", "remedy")
	clitest.OneErrorLine(t, r, "1 thing(s) would break")
}
