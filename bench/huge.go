package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/taskdeck/taskdeck/store/badger"
)

// The huge section (`-only huge`, never part of the default run or
// -quick): the first dashboard frame on a store of ten million records.
// Filling it takes about 100 µs of CPU a record (badger.Load), so its
// stores are kept in -huge-dir and filled only once; later runs reuse them.
var (
	hugeDir     = flag.String("huge-dir", "", "with -only huge: where its stores are kept and reused (default: a temporary directory, removed)")
	hugeRecords = flag.Int("huge-records", 10_000_000, "with -only huge: records in the large store")
	hugeOpen    = flag.Int("huge-open", 100_000, "with -only huge: of which open (also the open-only store's size)")
)

// tableLayout ends the stores' names: a store whose tables were written
// with other options (before issue 23's, with bloom filters) is not
// reused but filled again beside it.
const tableLayout = "-nobloom"

// filledMark is written beside a store once its fill has finished: a
// store without it is filled again from scratch.
const filledMark = ".filled"

// keptStore fills a store of total records (open of them open) in dir,
// unless a finished fill is there already; it says how long the fill took
// (0: reused).
func keptStore(dir string, total, open int) (time.Duration, error) {
	if _, err := os.Stat(dir + filledMark); err == nil {
		return 0, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return 0, err
	}
	el, err := fill(dir, total, open)
	if err != nil {
		return el, err
	}
	return el, os.WriteFile(dir+filledMark, []byte(el.String()+"\n"), 0o644)
}

func benchHuge(cfg config) (string, []finding) {
	total, open := *hugeRecords, *hugeOpen
	fail := func(err error) (string, []finding) {
		return fmt.Sprintf("\nhuge-store benchmark failed: %v\n", err), []finding{{"4.7 first frame on a huge store", false, err.Error()}}
	}
	if total <= open || open <= 0 {
		return fail(fmt.Errorf("-huge-records %d must exceed -huge-open %d, which must be positive", total, open))
	}
	dir := *hugeDir
	if dir == "" {
		dir = cfg.tmp
	}
	small := filepath.Join(dir, fmt.Sprintf("open-only-%d%s", open, tableLayout))
	large := filepath.Join(dir, fmt.Sprintf("records-%d-open-%d%s", total, open, tableLayout))
	fills := ""
	for _, s := range []struct {
		dir         string
		total, open int
	}{{small, open, open}, {large, total, open}} {
		el, err := keptStore(s.dir, s.total, s.open)
		if err != nil {
			return fail(err)
		}
		what := "reused"
		if el > 0 {
			what = fmt.Sprintf("filled in %v (%.0f records/s)", el.Round(time.Second), float64(s.total)/el.Seconds())
		}
		logf("huge: %s: %s", s.dir, what)
		fills += fmt.Sprintf("- %s (%d records, %d open): %s\n", filepath.Base(s.dir), s.total, s.open, what)
	}
	bin, err := buildTaskdeck(cfg.tmp)
	if err != nil {
		return fail(err)
	}
	marker := fmt.Sprintf("%d working", open)
	frames := [2][]float64{}
	for round := range cfg.rounds {
		for k := range 2 { // interleaved, each round starting with the other
			i := (k + round) % 2
			el, err := firstFrame(bin, []string{small, large}[i], marker)
			if err != nil {
				return fail(err)
			}
			frames[i] = append(frames[i], el.Seconds())
		}
	}
	// store.Open alone, in this process, interleaved: the part of the
	// frame that grows with the number of tables, in wall and CPU time
	// (this process's, every core).
	var opens [2][2][]float64 // store, then wall and CPU
	for round := range cfg.rounds {
		for k := range 2 {
			i := (k + round) % 2
			t0, c0 := time.Now(), cpuTime()
			s, err := badger.Open([]string{small, large}[i], nil)
			if err != nil {
				return fail(err)
			}
			opens[i][0] = append(opens[i][0], time.Since(t0).Seconds())
			opens[i][1] = append(opens[i][1], (cpuTime() - c0).Seconds())
			if err := s.Close(); err != nil {
				return fail(err)
			}
		}
	}
	t := &table{head: []string{"store", "process start → first frame with the task list (median)", "min–max", "vs open-only store",
		"store.Open alone (median)", "its CPU time (median)", "CPU vs open-only store"}}
	for i, name := range []string{fmt.Sprintf("%d open records only", open), fmt.Sprintf("%d records (%d open)", total, open)} {
		lo, hi := minMax(frames[i])
		t.add(name, dur(median(frames[i])), dur(lo)+"–"+dur(hi), ratio(median(frames[i]), median(frames[0])),
			dur(median(opens[i][0])), dur(median(opens[i][1])), ratio(median(opens[i][1]), median(opens[0][1])))
	}
	out := fmt.Sprintf("\nThe stores (`-huge-dir` keeps them for the next run):\n\n%s\nFirst dashboard frame as in section 4 "+
		"(the real binary in a %d×%d pseudo-terminal, until the status count %q shows), %d runs each, interleaved; "+
		"then `store.Open` alone in this process, %d each, interleaved:\n\n%s",
		fills, frameCols, frameRows, marker, cfg.rounds, cfg.rounds, t)
	big, base := median(frames[1]), median(frames[0])
	return out, []finding{
		{fmt.Sprintf("4.7 first dashboard frame under 200 ms (%d records, %d open)", total, open), big < 0.2, dur(big)},
		{"4.8 … within 1.5× the open-only store", big/base <= 1.5, fmt.Sprintf("%.2f× (%s vs %s)", big/base, dur(big), dur(base))},
	}
}
