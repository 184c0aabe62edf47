package service

import (
	"errors"
	"net"
	"path/filepath"
	"testing"

	"github.com/taskdeck/taskdeck/deck"
)

// An owner that goes away as Dial asks who it is (it accepted, then
// closed) is no owner: the error has ErrNoOwner in its chain, so Open
// chooses again (takes the store over, or dials the next owner) instead
// of failing the command with "the owner went away".
func TestDialOwnerGoneMidPing(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("unix", filepath.Join(dir, SocketName))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, err = Dial(t.Context(), dir)
	wantKind(t, "Dial of an owner gone mid-ping", err, deck.KindOwnerGone)
	if !errors.Is(err, ErrNoOwner) {
		t.Fatalf("Dial of an owner gone mid-ping: %v, want ErrNoOwner in its chain", err)
	}
}
