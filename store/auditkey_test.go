package store_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/storetest"
)

// The Badger store's audit key is made once, 32 random bytes, in a file
// of mode 0600 beside the data directory (not in it), and read back the
// same; a key file others may read, a key file cut short and a
// $TASKDECK_AUDIT_KEY too short are refused with a line that says what to
// fix; the variable outranks the file.
func TestAuditKeyBesideTheStore(t *testing.T) {
	t.Setenv(store.AuditKeyEnv, "")
	os.Unsetenv(store.AuditKeyEnv)
	dir := filepath.Join(t.TempDir(), "taskdeck")
	key, err := store.LoadAuditKey(dir)
	storetest.Must(t, err)
	path := store.AuditKeyPath(dir)
	if path != dir+".audit-key" || len(key) != 32 {
		t.Fatalf("key file %s, %d bytes", path, len(key))
	}
	fi, err := os.Stat(path)
	storetest.Must(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file's mode is %04o, want 0600", fi.Mode().Perm())
	}
	again, err := store.LoadAuditKey(dir)
	storetest.Must(t, err)
	if !bytes.Equal(again, key) {
		t.Fatal("a second load made another key")
	}

	storetest.Must(t, os.Chmod(path, 0o640))
	if _, err := store.LoadAuditKey(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a key file others may read: %v", err)
	}
	storetest.Must(t, os.Chmod(path, 0o600))
	storetest.Must(t, os.WriteFile(path, []byte("abcd\n"), 0o600))
	if _, err := store.LoadAuditKey(dir); err == nil || !strings.Contains(err.Error(), "restore it from its copy") {
		t.Fatalf("a key file cut short: %v", err)
	}

	t.Setenv(store.AuditKeyEnv, "00ff")
	if _, err := store.LoadAuditKey(dir); err == nil || !strings.Contains(err.Error(), "at least 64 hex digits") {
		t.Fatalf("a short $%s: %v", store.AuditKeyEnv, err)
	}
	t.Setenv(store.AuditKeyEnv, strings.Repeat("ab", 32))
	got, err := store.LoadAuditKey(dir)
	if err != nil || !bytes.Equal(got, bytes.Repeat([]byte{0xab}, 32)) {
		t.Fatalf("the variable's key: %x, %v", got, err)
	}
	if got, err := store.LoadAuditKey(""); err != nil || got == nil {
		t.Fatalf("a shared database with the variable: %x, %v", got, err)
	}
	os.Unsetenv(store.AuditKeyEnv)
	if got, err := store.LoadAuditKey(""); err != nil || got != nil {
		t.Fatalf("a shared database without the variable: %x, %v; want no key", got, err)
	}
}
