package service

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// peerCred reads the credentials the kernel recorded for the process at
// the other end of c when it connected.
func peerCred(c net.Conn) (*syscall.Ucred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("not a unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, credErr
}

// checkPeer admits only a peer of the owner's own (effective) user.
func checkPeer(cred *syscall.Ucred, uid int) error {
	if cred == nil {
		return fmt.Errorf("no peer credentials")
	}
	if int(cred.Uid) != uid {
		return fmt.Errorf("peer pid %d is uid %d, not the owner's uid %d", cred.Pid, cred.Uid, uid)
	}
	return nil
}

// admit says whether the peer of c may talk to this owner.
func admit(c net.Conn, uid int) error {
	cred, err := peerCred(c)
	if err != nil {
		return err
	}
	return checkPeer(cred, uid)
}

// peerPID is the pid of the process at the other end of c: for a
// client's connection, the owner that listens (0: unknown).
func peerPID(c net.Conn) int {
	cred, err := peerCred(c)
	if err != nil || cred == nil {
		return 0
	}
	return int(cred.Pid)
}

// cpuTime is the CPU time, in clock ticks, that process pid has used, and
// whether it can run: false for a stopped or traced process, a zombie,
// or one that is gone.
func cpuTime(pid int) (uint64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold anything: count after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	switch f[0] {
	case "T", "t", "Z", "X":
		return utime + stime, false
	}
	return utime + stime, true
}

// peerUID is the uid of the process at the other end of c.
func peerUID(c net.Conn) (int, bool) {
	cred, err := peerCred(c)
	if err != nil || cred == nil {
		return 0, false
	}
	return int(cred.Uid), true
}
