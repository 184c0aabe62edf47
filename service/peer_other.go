//go:build !linux

package service

import "net"

// admit relies on the socket's 0600 mode inside the 0700 data directory
// where SO_PEERCRED does not exist.
func admit(net.Conn, int) error { return nil }

// peerPID is unknown here.
func peerPID(net.Conn) int { return 0 }

// cpuTime is unknown here: an owner that does not answer is taken as stuck.
func cpuTime(int) (uint64, bool) { return 0, false }

// peerUID takes the peer to be this user: there is no SO_PEERCRED here.
func peerUID(net.Conn) (int, bool) { return 0, false }
