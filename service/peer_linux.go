package service

import (
	"fmt"
	"net"
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

// peerUID is the uid of the process at the other end of c.
func peerUID(c net.Conn) (int, bool) {
	cred, err := peerCred(c)
	if err != nil || cred == nil {
		return 0, false
	}
	return int(cred.Uid), true
}
