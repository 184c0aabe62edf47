package service

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestCheckPeer(t *testing.T) {
	uid := os.Getuid()
	if err := checkPeer(&syscall.Ucred{Pid: 1, Uid: uint32(uid)}, uid); err != nil {
		t.Fatalf("a peer of the same uid was refused: %v", err)
	}
	err := checkPeer(&syscall.Ucred{Pid: 7, Uid: uint32(uid + 1)}, uid)
	if err == nil || !strings.Contains(err.Error(), "pid 7") {
		t.Fatalf("a peer of another uid: %v, want refused, naming its pid", err)
	}
	if checkPeer(nil, uid) == nil {
		t.Fatal("a peer without credentials was admitted")
	}
}
