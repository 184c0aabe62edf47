package badger

import (
	"bufio"
	"bytes"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	badger "github.com/dgraph-io/badger/v4"
	boptions "github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
)

// Tables are checked before Badger opens them. Badger reads blocks
// unchecked by default, and a damaged block then yields changed records,
// or ends an iteration early without an error (its iterator has nowhere
// to put one); checking on each read does not help for that reason, and
// its error path panics (table.go:711 in v4.9.6). Checking every block of
// every table at each open costs a decompression of the whole store
// (125-300 ms for 100,000 records, 14 MB of tables, on the 2-core VM), so
// each table's blocks are checked once, and its whole file's CRC-32C,
// kept in sumsFile, is compared at later opens (a read of every table, on
// every core): tables never change once written, so any difference is
// damage. Tables written by a session are summed when it closes.
//
// Reading every table made opening a store of 1,000,000 records cost a
// read of 200 MB. So a table is read only if its file may have changed
// since it was summed: its inode or change time (a stamp kept with its
// sum) moved, or the last session did not close cleanly (its WAL holds
// commits to replay). What this leaves unchecked is damage that no write
// through the file system made (the medium's own decay) between a clean
// close and the next open; any write, copy, truncation or restore of a
// table is read again.

// sumsFile lists each table checked: its name, size and CRC-32C.
const sumsFile = "TABLESUMS"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type tableSum struct {
	size  int64
	crc   uint32
	stamp fileStamp // as the file was when it was summed; zero if unknown
}

// fileStamp tells whether a file may have changed (see stampOf).
type fileStamp struct {
	ino   uint64
	ctime int64
}

// readSums reads sumsFile; a missing or damaged one, or a damaged line,
// only means those tables are checked block by block again.
func readSums(dir string) map[string]tableSum {
	sums := map[string]tableSum{}
	b, err := os.ReadFile(filepath.Join(dir, sumsFile))
	if err != nil {
		return sums
	}
	body, tail, ok := bytes.Cut(b, []byte("end "))
	if !ok || strings.TrimSpace(string(tail)) != strconv.FormatUint(uint64(crc32.Checksum(body, castagnoli)), 16) {
		return sums // cut short or changed: trust none of it
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		var name string
		var s tableSum
		// Lines written before stamps have three fields.
		n, _ := fmt.Sscanf(sc.Text(), "%s %d %x %d %d", &name, &s.size, &s.crc, &s.stamp.ino, &s.stamp.ctime)
		switch n {
		case 3:
			s.stamp = fileStamp{}
			fallthrough
		case 5:
			sums[name] = s
		}
	}
	return sums
}

// writeSums replaces sumsFile, whole or not at all.
func writeSums(dir string, sums map[string]tableSum) error {
	names := make([]string, 0, len(sums))
	for name := range sums {
		names = append(names, name)
	}
	slices.Sort(names)
	var body bytes.Buffer
	for _, name := range names {
		s := sums[name]
		fmt.Fprintf(&body, "%s %d %x %d %d\n", name, s.size, s.crc, s.stamp.ino, s.stamp.ctime)
	}
	fmt.Fprintf(&body, "end %x\n", crc32.Checksum(body.Bytes(), castagnoli))
	tmp := filepath.Join(dir, sumsFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(body.Bytes())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, sumsFile))
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// fileSum is the size, CRC-32C and stamp of the file at path. The stamp
// is taken first: a change while it is read moves it.
func fileSum(path string) (tableSum, error) {
	stamp, _ := stampOf(path)
	f, err := os.Open(path)
	if err != nil {
		return tableSum{}, err
	}
	defer f.Close()
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, f)
	return tableSum{size: n, crc: h.Sum32(), stamp: stamp}, err
}

// fileSums sums the named files in dir on every core: reading every table
// is most of what opening a large store costs.
func fileSums(dir string, names []string) ([]tableSum, []error) {
	sums, errs := make([]tableSum, len(names)), make([]error, len(names))
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(names)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(names); i = int(next.Add(1) - 1) {
				sums[i], errs[i] = fileSum(filepath.Join(dir, names[i]))
			}
		})
	}
	wg.Wait()
	return sums, errs
}

// checkTables checks the tables the MANIFEST lists: none if the last
// session closed cleanly (clean) and the table's stamp has not moved since
// it was summed, else their footers first (tableFooter), then by their
// sum when they were checked before, else block by block. It returns why
// one is damaged, or "", and records the sums of the tables it checked.
// A table left unread has the footer it had when it was summed: reading
// every footer cost each open of a store of 10,000,000 records (169
// tables) 1.8 ms.
func checkTables(dir string, m badger.Manifest, listed []string, opt badger.Options, clean bool) string {
	sums := readSums(dir)
	changed := false
	var toRead []string
	for _, name := range listed {
		if want, ok := sums[name]; ok && clean && want.stamp != (fileStamp{}) {
			if stamp, ok := stampOf(filepath.Join(dir, name)); ok && stamp == want.stamp {
				continue
			}
		}
		if reason := tableFooter(filepath.Join(dir, name)); reason != "" {
			return "table " + name + " " + reason
		}
		toRead = append(toRead, name)
	}
	got, errs := fileSums(dir, toRead)
	for i, name := range toRead {
		path := filepath.Join(dir, name)
		got := got[i]
		if errs[i] != nil {
			continue // Badger says what it cannot read
		}
		if want, ok := sums[name]; ok && want.size == got.size {
			if want.crc != got.crc {
				return fmt.Sprintf("table %s has changed since it was written (CRC-32C %08x, was %08x)", name, got.crc, want.crc)
			}
			if want.stamp != got.stamp { // copied or restored, unchanged: trusted from now on
				sums[name], changed = got, true
			}
			continue
		}
		id, _ := table.ParseFileID(name)
		if err := checkBlocks(path, m.Tables[id].Compression, opt); err != nil {
			return fmt.Sprintf("table %s does not read back: %v", name, err)
		}
		sums[name], changed = got, true
	}
	for name := range sums {
		if !slices.Contains(listed, name) {
			delete(sums, name)
			changed = true
		}
	}
	if changed {
		_ = writeSums(dir, sums) // best effort: a table not recorded is checked again
	}
	return ""
}

// checkBlocks checks every block of the table at path against its
// checksum.
func checkBlocks(path string, c boptions.CompressionType, opt badger.Options) error {
	return withTable(path, c, opt, func(t *table.Table) error { return t.VerifyChecksum() })
}

// withTable opens the table at path read-only for fn. A panic in Badger's
// code (bad block offsets, or its nil dereference on a failed block read)
// is an error: the table is damaged.
func withTable(path string, c boptions.CompressionType, opt badger.Options, fn func(*table.Table) error) (err error) {
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	// Not Table.DecrRef: at zero references it deletes the file.
	defer mf.Close(-1)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	t, err := table.OpenTable(mf, table.Options{
		ReadOnly: true, ChkMode: boptions.NoVerification, Compression: c,
		BlockSize: opt.BlockSize, BloomFalsePositive: opt.BloomFalsePositive,
	})
	if err != nil {
		return err
	}
	return fn(t)
}

// recordSums adds the sums of the tables written since Open, once Badger
// has closed them, and drops those it deleted.
func recordSums(dir string) error {
	sums := readSums(dir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	present := map[string]bool{}
	changed := false
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".sst") {
			continue
		}
		present[name] = true
		fi, err := e.Info()
		if err != nil {
			continue
		}
		if s, ok := sums[name]; ok && s.size == fi.Size() {
			continue
		}
		s, err := fileSum(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		sums[name], changed = s, true
	}
	for name := range sums {
		if !present[name] {
			delete(sums, name)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return writeSums(dir, sums)
}
