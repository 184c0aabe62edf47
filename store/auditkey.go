package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// AuditKeyEnv names the environment variable that gives the audit key
// (at least 32 bytes, in hex): on a fleet, every host's the same; it
// outranks the key file.
const AuditKeyEnv = "TASKDECK_AUDIT_KEY"

// auditKeyBytes is the size of a key LoadAuditKey makes, and the least
// it accepts.
const auditKeyBytes = 32

// AuditKeyPath is the file that keeps the audit key of the Badger store
// in dataDir: beside the directory, not in it, so that whoever has the
// store (a copy, a backup, write access to the directory) does not have
// the key.
func AuditKeyPath(dataDir string) string {
	dataDir = filepath.Clean(dataDir)
	return filepath.Join(filepath.Dir(dataDir), filepath.Base(dataDir)+".audit-key")
}

// LoadAuditKey is the key that seals the audit log (model.SealAudit):
// $TASKDECK_AUDIT_KEY when set, else, for the Badger store in dataDir,
// the file AuditKeyPath(dataDir), made (32 random bytes, mode 0600) when
// there is none. A shared database (dataDir empty) without the variable
// has no key: nil. A key file others may read, or a key too short, is an
// error that says what to fix.
func LoadAuditKey(dataDir string) ([]byte, error) {
	if v, ok := os.LookupEnv(AuditKeyEnv); ok {
		key, err := hex.DecodeString(strings.TrimSpace(v))
		if err != nil || len(key) < auditKeyBytes {
			return nil, fmt.Errorf("$%s must be at least %d hex digits (%d bytes); make one with `openssl rand -hex %d`", AuditKeyEnv, 2*auditKeyBytes, auditKeyBytes, auditKeyBytes)
		}
		return key, nil
	}
	if dataDir == "" {
		return nil, nil
	}
	path := AuditKeyPath(dataDir)
	for {
		key, err := readAuditKey(path)
		if !errors.Is(err, fs.ErrNotExist) {
			return key, err
		}
		key = make([]byte, auditKeyBytes)
		_, _ = rand.Read(key) // never fails (crypto/rand)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue // another process made it first: read its
		}
		if err != nil {
			return nil, fmt.Errorf("make the audit key: %w", err)
		}
		_, err = f.WriteString(hex.EncodeToString(key) + "\n")
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(path) // half-written: the next open makes it again
			return nil, fmt.Errorf("make the audit key: %w", err)
		}
		return key, nil
	}
}

func readAuditKey(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the audit key %s may be read by others (mode %04o); `chmod 600 %s`", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the audit key: %w", err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) < auditKeyBytes {
		return nil, fmt.Errorf("the audit key %s is not %d or more bytes in hex; restore it from its copy (a new key would not verify the log)", path, auditKeyBytes)
	}
	return key, nil
}
