package e2e

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
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
	ports := make([]string, 2)
	for i := range ports {
		p, err := testproc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = strconv.Itoa(p)
	}
	mcpAddr, pprofAddr := net.JoinHostPort("127.0.0.1", ports[0]), net.JoinHostPort("127.0.0.1", ports[1])
	// Its MCP handler answers nothing to a bare GET; its pprof listener,
	// started first, says the process is up.
	testproc.Serve(t, exec.Command(bin, "-http", mcpAddr, "-pprof", pprofAddr), "go-sdk everything server", "http://"+pprofAddr+"/debug/pprof/")
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
