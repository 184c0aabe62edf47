package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/taskdeck/taskdeck/deck"
	"github.com/taskdeck/taskdeck/internal/storefill"
	"github.com/taskdeck/taskdeck/model"
	"github.com/taskdeck/taskdeck/store/badger"
)

// fill creates a new store at dir of total records, the first open of
// them working and the rest completed (internal/storefill), and times it.
func fill(dir string, total, open int) (time.Duration, error) {
	start := time.Now()
	err := storefill.Fill(dir, open, total-open)
	return time.Since(start), err
}

func benchStartup(cfg config) (string, []finding) {
	small := filepath.Join(cfg.tmp, "store-open-only")
	large := filepath.Join(cfg.tmp, "store-large")
	var out string
	var found []finding
	fail := func(err error) (string, []finding) {
		return out + fmt.Sprintf("\nstart-up benchmark failed: %v\n", err), append(found, finding{"4. start-up", false, err.Error()})
	}
	if _, err := fill(small, cfg.open, cfg.open); err != nil {
		return fail(err)
	}
	el, err := fill(large, cfg.records, cfg.open)
	if err != nil {
		return fail(err)
	}
	logf("startup: %d records written in %v (%.0f records/s, badger.Load)", cfg.records, el.Round(time.Millisecond), float64(cfg.records)/el.Seconds())
	bin, err := buildTaskdeck(cfg.tmp)
	if err != nil {
		return fail(err)
	}

	type probe struct {
		name, dir, mode string
		total, open     []float64
		list            []float64
		n               int
	}
	probes := []*probe{
		{name: fmt.Sprintf("taskdeck: Open + OpenTasks, store of %d open records only", cfg.open), dir: small, mode: "index"},
		{name: fmt.Sprintf("taskdeck: Open + OpenTasks, store of %d records (%d open)", cfg.records, cfg.open), dir: large, mode: "index"},
		{name: fmt.Sprintf("full scan: Open + All, filter open, same %d records", cfg.records), dir: large, mode: "scan"},
	}
	// The dashboard's first frame with the task list, on the same stores:
	// its status counts say how many tasks work.
	marker := fmt.Sprintf("%d working", cfg.open)
	frames := []*probe{
		{name: fmt.Sprintf("taskdeck dashboard, store of %d open records only", cfg.open), dir: small},
		{name: fmt.Sprintf("taskdeck dashboard, store of %d records (%d open)", cfg.records, cfg.open), dir: large},
	}
	// Commands' first lines, on the same stores, in pairs (the open-only
	// store, then the large one): `taskdeck watch`'s comes once the open
	// tasks are in and reconciled, `taskdeck ls`'s is the newest record.
	commands := []*probe{
		{name: fmt.Sprintf("taskdeck watch --json, store of %d open records only", cfg.open), dir: small, mode: "watch"},
		{name: fmt.Sprintf("taskdeck watch --json, store of %d records (%d open)", cfg.records, cfg.open), dir: large, mode: "watch"},
		{name: fmt.Sprintf("taskdeck ls --json, store of %d open records only", cfg.open), dir: small, mode: "ls"},
		{name: fmt.Sprintf("taskdeck ls --json, store of %d records (%d open)", cfg.records, cfg.open), dir: large, mode: "ls"},
	}
	// Watchers through the owner's socket, on the same stores: the
	// dashboard's window, the proxy hub's (open tasks only), and a Watch
	// of every record (what both did before: once on the large store, it
	// takes seconds).
	type watchRun struct {
		name  string
		dir   string
		win   *deck.Window
		once  bool
		first []float64
		heap  []float64
		owner []float64
		n     int
	}
	dash, hubW := &deck.Window{Finished: 1000}, &deck.Window{}
	watches := []*watchRun{
		{name: fmt.Sprintf("WatchWindow(finished 1000), the dashboard's, %d open records only", cfg.open), dir: small, win: dash},
		{name: fmt.Sprintf("WatchWindow(finished 1000), the dashboard's, %d records (%d open)", cfg.records, cfg.open), dir: large, win: dash},
		{name: fmt.Sprintf("WatchWindow(finished 0), the proxy hub's, %d open records only", cfg.open), dir: small, win: hubW},
		{name: fmt.Sprintf("WatchWindow(finished 0), the proxy hub's, %d records (%d open)", cfg.records, cfg.open), dir: large, win: hubW},
	}
	if cfg.records <= 100_000 { // at 1,000,000 it takes minutes and gigabytes
		watches = append(watches, &watchRun{name: fmt.Sprintf("Watch(0), every record (before), %d records (%d open), once", cfg.records, cfg.open), dir: large, once: true})
	}
	rounds := cfg.rounds
	for round := range rounds {
		for _, w := range watches {
			if w.once && round > 0 {
				continue
			}
			first, heap, owner, n, err := watchOnce(w.dir, w.win)
			if err != nil {
				return fail(err)
			}
			w.first, w.heap, w.owner, w.n = append(w.first, first.Seconds()), append(w.heap, heap), append(w.owner, owner), n
		}
		for k := range probes {
			p := probes[(k+round)%len(probes)]
			if p.mode == "scan" && round >= 2 {
				continue // a minute each at 1,000,000 records; two are enough
			}
			total, open, list, n, err := startupOnce(p.dir, p.mode)
			if err != nil {
				return fail(err)
			}
			p.total, p.open, p.list, p.n = append(p.total, total.Seconds()), append(p.open, open.Seconds()), append(p.list, list.Seconds()), n
		}
		for k := range frames {
			p := frames[(k+round)%len(frames)]
			el, err := firstFrame(bin, p.dir, marker)
			if err != nil {
				return fail(err)
			}
			p.total = append(p.total, el.Seconds())
		}
		for k := range commands {
			p := commands[(k+round)%len(commands)]
			el, err := firstLine(bin, p.dir, p.mode, "--json")
			if err != nil {
				return fail(err)
			}
			p.total = append(p.total, el.Seconds())
		}
	}
	t := &table{head: []string{"design", "process start → list ready (median)", "min–max", "of which store.Open", "of which the list", "open tasks found", "vs open-only store", "vs full scan"}}
	for _, p := range probes {
		lo, hi := minMax(p.total)
		t.add(p.name, dur(median(p.total)), dur(lo)+"–"+dur(hi), dur(median(p.open)), dur(median(p.list)), fmt.Sprint(p.n),
			ratio(median(p.total), median(probes[0].total)), ratio(median(p.total), median(probes[2].total)))
	}
	out += fmt.Sprintf("\nStart-up, each run a fresh process (exec included), page cache warm, %d runs (scan: ≤2), "+
		"the store filled by badger.Load (Create in a scratch store, streamed into the new one) in %v:\n\n%s", rounds, el.Round(time.Second), t)
	tf := &table{head: []string{"design", "process start → first frame with the task list (median)", "min–max", "vs open-only store", "vs list ready, same store"}}
	for i, p := range frames {
		lo, hi := minMax(p.total)
		tf.add(p.name, dur(median(p.total)), dur(lo)+"–"+dur(hi), ratio(median(p.total), median(frames[0].total)), ratio(median(p.total), median(probes[i].total)))
	}
	out += fmt.Sprintf("\nFirst dashboard frame, in the same rounds: the real taskdeck binary (`go build`) in a %d×%d pseudo-terminal "+
		"on the same stores, with a server config that names no server (nothing is contacted); the clock runs from just before exec "+
		"to the first terminal output that holds the status count %q, which the first frame with the task list draws. %d runs:\n\n%s",
		frameCols, frameRows, marker, rounds, tf)
	tc := &table{head: []string{"design", "process start → first line (median)", "min–max", "vs open-only store"}}
	for i, p := range commands {
		lo, hi := minMax(p.total)
		tc.add(p.name, dur(median(p.total)), dur(lo)+"–"+dur(hi), ratio(median(p.total), median(commands[i-i%2].total)))
	}
	out += fmt.Sprintf("\n`taskdeck watch --json` and `taskdeck ls --json`, in the same rounds, on the same stores with the same config: the "+
		"clock runs from just before exec to the first line on stdout: for watch, the first open task it found, printed once the "+
		"start-up reconcile of the %d open tasks is over (each unreachable: their server is not configured); for ls, the newest "+
		"record. %d runs:\n\n%s", cfg.open, rounds, tc)
	tw := &table{head: []string{"watcher", "Watch call → first event (median)", "min–max", "records in the snapshot", "watcher's Go heap holding them (median)", "the owner's Go heap over the call (median)", "first event vs open-only store", "watcher's heap vs open-only store", "owner's heap vs open-only store"}}
	for i, w := range watches {
		lo, hi := minMax(w.first)
		base := watches[i-i%2] // the same watcher on the open-only store
		if w.once {
			base = watches[0]
		}
		tw.add(w.name, dur(median(w.first)), dur(lo)+"–"+dur(hi), fmt.Sprint(w.n), bytesStr(median(w.heap)), bytesStr(median(w.owner)),
			ratio(median(w.first), median(base.first)), ratio(median(w.heap), median(base.heap)), ratio(median(w.owner), median(base.owner)))
	}
	out += fmt.Sprintf("\nWatchers through the owner's socket: the owner (the engine opened on the store and served, service.Serve) "+
		"in a child process, a client (service.Dial) in this one watches from 0; the clock runs from the call to the snapshot's "+
		"first part; the watcher's heap is what this process holds after a GC with every part of the snapshot in hand, over "+
		"what it held before the call; the owner's, the same in the child (its block cache, 8 MiB at most, is part of it). "+
		"%d runs (every record: 1):\n\n%s", rounds, tw)
	for _, i := range []int{1, 3} {
		w, base := watches[i], watches[i-1]
		found = append(found, finding{"4.5 a watcher through the socket: first event within 50 ms (" + w.name + ")",
			median(w.first) < 0.05, dur(median(w.first))})
		// Per record it holds: the dashboard's window holds its page of
		// finished records besides the open ones on the large store.
		per, basePer := median(w.heap)/float64(max(w.n, 1)), median(base.heap)/float64(max(base.n, 1))
		found = append(found, finding{"4.6 the watcher's memory flat in the finished records (" + w.name + ", heap per record it holds ≤ 1.5× open-only)",
			per <= 1.5*basePer, fmt.Sprintf("%s vs %s per record (%s for %d records vs %s for %d); the owner's heap over the call %s vs %s",
				bytesStr(per), bytesStr(basePer), bytesStr(median(w.heap)), w.n, bytesStr(median(base.heap)), base.n,
				bytesStr(median(w.owner)), bytesStr(median(base.owner)))})
	}

	big := median(probes[1].total)
	found = append(found, finding{fmt.Sprintf("4.1 start-up to open-task list under 200 ms (%d records, %d open)", cfg.records, cfg.open),
		big < 0.2, dur(big)})
	r := big / median(probes[0].total)
	found = append(found, finding{"4.2 start-up independent of the number of terminal records", r < 1.5,
		fmt.Sprintf("%.2f× the open-only store (%s vs %s)", r, dur(big), dur(median(probes[0].total)))})
	bigFrame, smallFrame := median(frames[1].total), median(frames[0].total)
	found = append(found, finding{fmt.Sprintf("4.3 start-up to the first dashboard frame with the task list under 200 ms (%d records, %d open)", cfg.records, cfg.open),
		bigFrame < 0.2, dur(bigFrame)})
	found = append(found, finding{"4.4 first dashboard frame independent of the number of terminal records", bigFrame/smallFrame < 1.5,
		fmt.Sprintf("%.2f× the open-only store (%s vs %s)", bigFrame/smallFrame, dur(bigFrame), dur(smallFrame))})

	for i, target := range []string{"4.9 `taskdeck watch`", "4.10 `taskdeck ls`"} {
		big, small := median(commands[2*i+1].total), median(commands[2*i].total)
		found = append(found, finding{target + " first line independent of the number of terminal records (≤ 1.5× the open-only store)", big/small < 1.5,
			fmt.Sprintf("%.2f× the open-only store (%s vs %s)", big/small, dur(big), dur(small))})
	}

	// 5. Store size.
	t5 := &table{head: []string{"state", "records", "apparent size", "on disk (allocated)", "on disk per record"}}
	sizeRow := func(state string, n int) {
		app, alloc := dirSize(large)
		per := "–"
		if n > 0 {
			per = fmt.Sprintf("%.0f B", float64(alloc)/float64(n))
		}
		t5.add(state, fmt.Sprint(n), bytesStr(float64(app)), bytesStr(float64(alloc)), per)
	}
	sizeRow("after writing, closed", cfg.records)
	_, allocBefore := dirSize(large)
	perBefore := float64(allocBefore) / float64(cfg.records)
	s, err := badger.Open(large, nil)
	if err != nil {
		return fail(err)
	}
	start := time.Now()
	pruned, err := s.Prune(time.Time{}, model.Actor{Name: "bench", Role: model.RoleUser})
	pruneTime := time.Since(start)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err)
	}
	left := cfg.records - pruned
	sizeRow(fmt.Sprintf("after Prune (%d deleted in %v), closed; the audit log keeps its entries", pruned, pruneTime.Round(time.Millisecond)), left)
	// The audit log keeps an entry of every change, pruned tasks' too,
	// until it is pruned itself (taskdeck audit prune --before).
	s, err = badger.Open(large, nil)
	if err != nil {
		return fail(err)
	}
	start = time.Now()
	audited, err := s.PruneAudit(time.Now())
	auditTime := time.Since(start)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err)
	}
	sizeRow(fmt.Sprintf("after PruneAudit (%d entries deleted in %v), closed", audited, auditTime.Round(time.Millisecond)), left)
	// Badger drops deleted keys when compaction reaches them; give its
	// background compactors a while in an open store, as a running
	// dashboard would.
	s, err = badger.Open(large, nil)
	if err != nil {
		return fail(err)
	}
	idle := 10 * time.Second
	if cfg.quick {
		idle = 3 * time.Second
	}
	time.Sleep(idle)
	if err := s.Close(); err != nil {
		return fail(err)
	}
	sizeRow(fmt.Sprintf("after Prune and %v open (background compaction), closed", idle), left)
	total, _, _, n, err := startupOnce(large, "index")
	if err != nil {
		return fail(err)
	}
	out += fmt.Sprintf("\nStore size (the same store; start-up after pruning: %s, %d open tasks):\n\n%s", dur(total.Seconds()), n, t5)
	_, alloc := dirSize(large)
	perAfter := float64(alloc) / float64(max(left, 1))
	found = append(found, finding{"5. pruning the records and the audit log gives the space back (per record ≤ 2× before pruning)", perAfter <= 2*perBefore,
		fmt.Sprintf("%s on disk for %d records (%.0f B/record; %.0f B/record before)", bytesStr(float64(alloc)), left, perAfter, perBefore)})
	return out, found
}
