// Package pgtest runs a real PostgreSQL for the tests of one package: one
// server per test binary, started on first use in a temporary directory on a
// free loopback port (as the unprivileged postgres or nobody user when the
// tests run as root, since PostgreSQL refuses root), and a fresh database
// per test. Run stops the server by its pid when the tests end.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskdeck/taskdeck/internal/testproc"
)

// server is the package's PostgreSQL, once started.
type server struct {
	cmd  *exec.Cmd
	dir  string
	port int
	err  error // why it could not start
	skip string
	bin  string
	data string
	cred *syscall.Credential
	// exited is closed when the postgres process has ended.
	exited chan struct{}
}

var (
	once  sync.Once
	srv   server
	dbSeq atomic.Int64
)

// Run runs the tests and then stops the server if one was started: call it
// from TestMain as os.Exit(pgtest.Run(m)).
func Run(m *testing.M) int {
	code := m.Run()
	stop()
	return code
}

// Bin is the directory of PostgreSQL's programs (15 where it is there),
// or "" when none is installed.
func Bin() string {
	if _, err := os.Stat("/usr/lib/postgresql/15/bin/postgres"); err == nil {
		return "/usr/lib/postgresql/15/bin"
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(matches) == 0 {
		return ""
	}
	return filepath.Dir(matches[len(matches)-1])
}

// DB creates a fresh database on the package's server and returns its
// connection string. Without PostgreSQL it skips the test, or fails it when
// CI=true (CI must not skip silently).
func DB(t testing.TB) string {
	t.Helper()
	once.Do(start)
	if srv.skip != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s", srv.skip)
		}
		t.Skip(srv.skip)
	}
	if srv.err != nil {
		t.Fatalf("cannot start PostgreSQL: %v", srv.err)
	}
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, connString("postgres"))
	if err != nil {
		t.Fatalf("connect to the test PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	return connString(name)
}

// Addr is the server's host:port (after DB has been called once).
func Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.port)) }

func connString(db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", Addr(), db)
}

func start() {
	bin := Bin()
	if bin == "" {
		srv.skip = "no PostgreSQL under /usr/lib/postgresql/*/bin (install Debian's postgresql, as .ci/run does)"
		return
	}
	srv.err = launch(bin)
}

func launch(bin string) error {
	dir, err := os.MkdirTemp("", "taskdeck-pgtest-")
	if err != nil {
		return err
	}
	srv.dir = dir
	data := filepath.Join(dir, "data")
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		cred, err = unprivileged()
		if err != nil {
			return err
		}
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	testproc.Group(initdb)
	initdb.Env = append(os.Environ(), "LC_ALL=C")
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v: %s", err, out)
	}
	srv.bin, srv.data, srv.cred = bin, data, cred
	// A port is free only until something binds it: one that another
	// process took before postgres did is given up for another.
	for attempt := 1; ; attempt++ {
		if srv.port, err = testproc.FreePort(); err != nil {
			return err
		}
		err = serve()
		if err == nil || attempt == 5 || !strings.Contains(strings.ToLower(err.Error()), "address already in use") {
			return err
		}
	}
}

// serve starts postgres on srv's data and port, and waits until it accepts
// connections.
func serve() error {
	log, err := os.OpenFile(filepath.Join(srv.dir, "postgres.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o666)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(filepath.Join(srv.bin, "postgres"), "-D", srv.data, "-p", strconv.Itoa(srv.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+srv.dir, "-c", "max_connections=200")
	// A test binary that times out (a panic, no cleanup) takes its
	// postgres with it (the backends follow their postmaster); stop
	// kills what the server left in its group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: srv.cred}
	testproc.Group(cmd)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	srv.cmd = cmd
	exited := make(chan struct{})
	srv.exited = exited
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, connString("postgres"))
		cancel()
		if err == nil {
			_ = conn.Close(context.Background())
			return nil
		}
		select {
		case <-exited:
			out, _ := os.ReadFile(log.Name())
			return fmt.Errorf("postgres exited: %s", termLast(out))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within 30s: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// termLast is the end of a log, enough to say why a server stopped.
func termLast(b []byte) []byte {
	if len(b) > 2000 {
		return b[len(b)-2000:]
	}
	return b
}

// unprivileged is the user PostgreSQL runs as under root: postgres, or
// nobody where there is none.
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root, and neither a postgres nor a nobody user exists to run PostgreSQL as")
}

// stop ends the server by its pid (a fast shutdown, then a kill) and
// removes its directory.
func stop() {
	if srv.cmd != nil {
		testproc.Stop(srv.cmd, syscall.SIGINT, 10*time.Second, srv.exited)
	}
	if srv.dir != "" {
		_ = os.RemoveAll(srv.dir)
	}
}

// Restart stops the server and starts it again on the same port and data,
// for tests of a lost database; it waits until it accepts connections.
func Restart(t testing.TB, down func()) {
	t.Helper()
	Stop(t)
	if down != nil {
		down()
	}
	Start(t)
}

// Stop stops the server (a fast shutdown, as an operator's) and waits for
// it to end, for tests of a lost database. If the test ends with it
// stopped, it is started again for the package's other tests.
func Stop(t testing.TB) {
	t.Helper()
	_ = srv.cmd.Process.Signal(syscall.SIGINT)
	<-srv.exited
	t.Cleanup(func() {
		if stopped() {
			if err := serve(); err != nil {
				t.Errorf("start PostgreSQL again: %v", err)
			}
		}
	})
}

// Start starts the stopped server again on the same port and data; it
// waits until it accepts connections.
func Start(t testing.TB) {
	t.Helper()
	if err := serve(); err != nil {
		t.Fatalf("start PostgreSQL again: %v", err)
	}
}

func stopped() bool {
	select {
	case <-srv.exited:
		return true
	default:
		return false
	}
}
