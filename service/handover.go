package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/taskdeck/taskdeck/deck"
)

// A lasting owner (taskdeck serve) takes the store from a transient one
// (a dashboard, watch, a command) without waiting for it to exit:
//
//  1. serve writes the take-over mark (its pid) in the data directory,
//     so that no other process takes the store once the owner lets go;
//  2. it asks the owner to hand over, on the socket (a peer of the same
//     uid only, as every request);
//  3. the owner stops serving the socket (its requests in flight
//     answered), lets the engine's requests in flight end by themselves
//     for up to HandOverGrace (a call gets its handle committed), closes
//     the store, and from then on works through serve's socket: its feeds
//     resume from their last revision;
//  4. serve opens the store, serves, and removes the mark.
//
// Every process that finds no owner on the socket while the mark names a
// live process waits for that one instead of taking the store. A mark whose process is gone (serve killed) or older than
// markFor is no mark: the next command owns the store as before.

// HandOverGrace bounds how long a transient owner that hands over waits
// for its requests in flight (a tools/call waits for the server's answer
// up to the request timeout, 30 s by default); past it they are cut off,
// and a call sent but unanswered is left orphaned.
const HandOverGrace = 40 * time.Second

// markFor is how long a take-over mark holds: the handover's longest wait
// and the time to open the store after it.
const markFor = HandOverGrace + 20*time.Second

// markName is the take-over mark in the data directory.
const markName = "taskdeck.takeover"

// pathHandOver asks a transient owner to hand the store over to the
// process asking.
const pathHandOver = "/v1/handover"

// AskHandOver asks the transient owner d (from Dial) to hand the store in
// dataDir over to this process, which must then open it: Open's callers
// wait for this process meanwhile. done removes the mark: call it once
// this process serves the store, or has given up.
func AskHandOver(ctx context.Context, dataDir string, d deck.Deck) (done func(), err error) {
	r, ok := d.(*remote)
	if !ok {
		return nil, errors.New("not a dialed owner")
	}
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, err
	}
	done, err = writeMark(dir)
	if err != nil {
		return nil, err
	}
	if err := r.do(ctx, http.MethodPost, pathHandOver, empty{}, &empty{}); err != nil {
		done()
		return nil, err
	}
	return done, nil
}

// writeMark writes this process's pid as the take-over mark, replacing
// whatever is there (a rename never follows a link planted at the name).
func writeMark(dir string) (func(), error) {
	f, err := os.CreateTemp(dir, markName+".*")
	if err != nil {
		return nil, fmt.Errorf("cannot write the take-over mark in %s (%v)", dir, err)
	}
	tmp := f.Name()
	_, err = f.WriteString(strconv.Itoa(os.Getpid()))
	err = errors.Join(err, f.Close())
	path := filepath.Join(dir, markName)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("cannot write the take-over mark in %s (%v)", dir, err)
	}
	return func() {
		// Only this process's own mark: another serve may have written its own since.
		if pid, _ := readMark(dir); pid == os.Getpid() {
			os.Remove(path)
		}
	}, nil
}

// readMark is the pid in the take-over mark in dir and when it was
// written (0: none readable).
func readMark(dir string) (int, time.Time) {
	path := filepath.Join(dir, markName)
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > 32 {
		return 0, time.Time{}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, time.Time{}
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, time.Time{}
	}
	return pid, fi.ModTime()
}

// takingOver is the pid of a live process that is taking the store in
// dataDir over (0: none). It may be this one: a program that asks with
// AskHandOver opens the engine itself, not through Open.
func takingOver(dataDir string) int {
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return 0
	}
	pid, at := readMark(dir)
	if pid == 0 || time.Since(at) > markFor {
		return 0
	}
	if _, runs := cpuTime(pid); !runs {
		return 0
	}
	return pid
}

// errKeeps refuses a handover: an owner that serves until stopped (or a
// program serving its own deck) keeps the store.
func errKeeps() error {
	return deck.Errorf(deck.KindState, "this taskdeck owner (pid %d) does not hand the store over", os.Getpid())
}

// serveHandOver answers a request to hand over: at once, before the owner
// stops serving (which waits for the requests in flight, this one too).
func (s *Server) serveHandOver(w http.ResponseWriter, r *http.Request, handOver func(pid int)) {
	if handOver == nil {
		replyErr(w, errKeeps())
		return
	}
	pid, _ := r.Context().Value(peerPIDKey{}).(int)
	s.log.Info("handing the store over", "to", pid)
	reply(w, empty{})
	go handOver(pid)
}
