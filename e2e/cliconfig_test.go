package e2e

import (
	"path/filepath"
	"testing"

	"github.com/taskdeck/taskdeck/internal/clitest"
)

// TestDefaultConfigMayBeMissing: the default config path that does not
// exist is an empty configuration (an explicit --config must exist: the
// in-process TestExplicitConfigMustExist).
func TestDefaultConfigMayBeMissing(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	r := runTD(t, env, "--data-dir", filepath.Join(t.TempDir(), "data"), "servers").Must(t, exitOK)
	clitest.MustContain(t, r, r.Stdout, "no servers configured in ")
}
