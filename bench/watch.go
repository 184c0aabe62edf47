package main

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/engine"
	"github.com/taskdeck/taskdeck/service"
)

// watchOnce opens the engine on the store in dir and serves it on its
// socket, in this process, then watches through the socket as another
// program would: the time from the Watch call to its first event (the
// snapshot), and the Go heap the watcher holds once that event is in
// (after a GC, over the heap before the Watch: the engine and the server
// are already open).
func watchOnce(dir string, w *deck.Window) (first time.Duration, heap float64, entries int, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	eng, err := engine.Open(engine.Options{DataDir: dir})
	if err != nil {
		return 0, 0, 0, err
	}
	defer eng.Close()
	srv, err := service.Serve(ctx, dir, eng, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	defer srv.Shutdown(context.Background())
	client, err := service.Dial(ctx, dir)
	if err != nil {
		return 0, 0, 0, err
	}
	defer client.Close()
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel() // first: the server's Shutdown waits for the stream
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	var feed deck.Feed
	if w != nil {
		feed, err = client.WatchWindow(wctx, 0, *w)
	} else {
		feed, err = client.Watch(wctx, 0)
	}
	if err != nil {
		return 0, 0, 0, err
	}
	ev, ok := <-feed.Events()
	first = time.Since(t0)
	if !ok {
		return 0, 0, 0, fmt.Errorf("the feed ended before its first event: %v", feed.Err())
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap = float64(after.HeapAlloc) - float64(before.HeapAlloc)
	runtime.KeepAlive(ev)
	return first, heap, len(ev.Entries), nil
}
