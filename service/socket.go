package service

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// SocketName is the owner's socket inside the data directory.
const SocketName = "taskdeck.sock"

// maxSocketPath is what sockaddr_un holds, less its NUL (Linux: 108
// bytes; the BSDs and macOS: 104, so the smaller one).
const maxSocketPath = 103

// SocketPath returns the absolute path of the owner's socket in dataDir.
// However deep it is, it is reached through reach.
func SocketPath(dataDir string) (string, error) {
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return "", fmt.Errorf("cannot resolve data directory %s (%v); choose another --data-dir", dataDir, err)
	}
	return filepath.Join(dir, SocketName), nil
}

// reach runs fn (a bind or a connect) on an address of the socket at
// path that fits a sockaddr_un: path itself, or, in a data directory too
// deep for it, path through a descriptor of its directory held open
// meanwhile (Linux: /proc/self/fd/N/taskdeck.sock). The socket stays in
// the data directory either way, private with it.
func reach(path string, fn func(addr string) error) error {
	if len(path) <= maxSocketPath {
		return fn(path)
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err // no directory, no socket: as a connect to it fails
	}
	defer dir.Close()
	addr := viaDir(dir, filepath.Base(path))
	if addr == "" {
		return fmt.Errorf("data directory %s is too deep for its socket (%d bytes, a unix socket path allows %d); choose a shorter --data-dir", filepath.Dir(path), len(path), maxSocketPath)
	}
	return fn(addr)
}

// checkSocket refuses to connect through a symbolic link at the socket's
// path, or to a socket another user made: either could lead this
// process's commands into another store. Nothing there is no owner; any
// other kind of file fails the connect, and a would-be owner refuses it.
func checkSocket(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case err != nil:
		return nil
	case fi.Mode().Type()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link, not an owner's socket; remove it or choose another --data-dir", path)
	}
	if uid, ok := fileUID(fi); ok && uid != os.Geteuid() {
		return fmt.Errorf("socket %s belongs to uid %d, not to you; remove it or choose another --data-dir", path, uid)
	}
	return nil
}

// ErrOwnerRunning means that another process already serves on the socket.
var ErrOwnerRunning = errors.New("another taskdeck already serves this data directory")

// listen makes the socket at path, replacing a stale one a killed owner
// left (nobody accepts on it), and never following anything that is not
// a socket.
func listen(path string) (*net.UnixListener, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("cannot check socket %s (%v); choose another --data-dir", path, err)
	case fi.Mode().Type() != fs.ModeSocket:
		return nil, fmt.Errorf("%s is not a socket (%s); remove it or choose another --data-dir", path, fileKind(fi))
	default:
		var c net.Conn
		err := reach(path, func(addr string) (err error) {
			c, err = (&net.Dialer{Timeout: time.Second}).DialContext(context.Background(), "unix", addr)
			return err
		})
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: %w", path, ErrOwnerRunning)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("cannot check socket %s (%v); remove it or choose another --data-dir", path, err)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("cannot replace the stale socket %s (%v); remove it", path, err)
		}
	}
	var l *net.UnixListener
	err = reach(path, func(addr string) (err error) {
		l, err = net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cannot serve on %s (%v); choose another --data-dir", path, err)
	}
	// The socket is born with the umask's mode, but inside the 0700 data
	// directory nobody else can reach it before this chmod.
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("cannot make socket %s private (%v); choose another --data-dir", path, err)
	}
	return l, nil
}

func fileKind(fi fs.FileInfo) string {
	switch t := fi.Mode().Type(); {
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	case fi.IsDir():
		return "a directory"
	case t == 0:
		return "a regular file"
	default:
		return t.String()
	}
}
