package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/service"
)

// watchOnce serves the store in dir from an owner in a child process (the
// engine and its socket, as `taskdeck serve` runs them) and watches it
// from this process, as the dashboard or the proxy does: the time from the
// Watch call to its first event (the snapshot's first part), the entries
// of the whole snapshot, the Go heap this watcher holds with them all in
// hand (after a GC, over its heap before the call),
// and the owner's heap over the same call (its own report, after a GC).
// The two are apart so that the watcher's figure is its own: measured in
// one process, the owner's block cache, filled by the walk through a
// large store's index (bounded at 8 MiB), counted as the watcher's.
func watchOnce(dir string, w *deck.Window) (first time.Duration, heap, ownerHeap float64, entries int, err error) {
	owner, err := startChild(childEnv+"=owner", "TASKDECK_BENCH_DIR="+dir)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer owner.stop()
	if _, err := owner.line(time.Minute); err != nil { // "ready"
		return 0, 0, 0, 0, err
	}
	ownerBefore, err := owner.heap()
	if err != nil {
		return 0, 0, 0, 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client, err := service.Dial(ctx, dir)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer client.Close()
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	before := heapAlloc()
	t0 := time.Now()
	var feed deck.Feed
	if w != nil {
		feed, err = client.WatchWindow(wctx, 0, *w)
	} else {
		feed, err = client.Watch(wctx, 0)
	}
	if err != nil {
		return 0, 0, 0, 0, err
	}
	// The watcher keeps every entry of the snapshot, as the dashboard's
	// table does: its parts up to the last (More false).
	var held [][]deck.Entry
	for more := true; more; {
		ev, ok := <-feed.Events()
		if !ok {
			return 0, 0, 0, 0, fmt.Errorf("the feed ended before its snapshot did: %v", feed.Err())
		}
		if held == nil {
			first = time.Since(t0)
		}
		held = append(held, ev.Entries)
		entries += len(ev.Entries)
		more = ev.More
	}
	heap = heapAlloc() - before
	runtime.KeepAlive(held)
	ownerAfter, err := owner.heap()
	if err != nil {
		return 0, 0, 0, 0, err
	}
	return first, heap, ownerAfter - ownerBefore, entries, nil
}

// heap asks the owner child for its Go heap after a GC.
func (c *child) heap() (float64, error) {
	if _, err := fmt.Fprintln(c.stdin, "heap"); err != nil {
		return 0, err
	}
	line, err := c.line(time.Minute)
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(line, 64)
}

// childOwner opens the engine on the store and serves it on its socket,
// prints "ready", answers each "heap" on its stdin with its Go heap after
// a GC, and stops when its stdin closes.
func childOwner() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := os.Getenv("TASKDECK_BENCH_DIR")
	eng, err := engine.Open(engine.Options{DataDir: dir})
	if err != nil {
		fmt.Println("error", err)
		return
	}
	defer eng.Close()
	srv, err := service.Serve(ctx, dir, eng, nil)
	if err != nil {
		fmt.Println("error", err)
		return
	}
	defer srv.Shutdown(context.Background())
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		fmt.Println(heapAlloc())
	}
}
