package badger

import (
	"bytes"
	"fmt"
	"iter"
	"os"
	"sync"
	"sync/atomic"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
	"github.com/dgraph-io/ristretto/v2/z"

	"github.com/taskdeck/taskdeck/model"
)

// Load builds benchmark stores of millions of records in minutes, where
// one synced Create after another takes hours. Each chunk of records is
// created by Create itself in a scratch in-memory Badger, so the keys,
// index entries, revisions, counts and audit chain are Create's; the
// chunk's keys are then streamed into the new store's bottom level
// (Badger's StreamWriter: sorted tables, no compaction), synced once.

// loadChunk is how many records one scratch store holds before its keys
// are streamed out: about 40 MB of keys and values at ~2 KB a record.
const loadChunk = 20_000

// Load fills dir, which must not exist or be empty, with records as
// Create writes them, and closes it; Open reads it as any store. The ids must come in increasing order (the
// stream needs each index's keys sorted; NewID's ids of increasing times
// are) and no record may carry an idempotency key. It returns how many
// records it wrote.
func Load(dir string, records iter.Seq[*model.Task]) (n int, err error) {
	if err := PrepareDir(dir); err != nil {
		return 0, err
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) > 0 {
		return 0, fmt.Errorf("store %s: Load needs a new, empty directory", dir)
	}
	disk, err := badger.Open(options(dir, nil))
	if err != nil {
		return 0, openError(dir, err)
	}
	sw := disk.NewStreamWriter()
	defer func() {
		if err != nil {
			sw.Cancel()
		}
		if cerr := disk.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err == nil {
			err = restrictFiles(dir)
		}
		if err == nil {
			err = recordSums(dir)
		}
	}()
	if err := sw.Prepare(); err != nil {
		return 0, err
	}
	// Two scratch stores take turns: one takes a chunk's Creates while
	// the other's keys are streamed out, so both cores work.
	free, full := make(chan *badger.DB, 2), make(chan *badger.DB, 1)
	for range 2 {
		mem, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil).WithMemTableSize(64 << 20))
		if err != nil {
			return 0, err
		}
		defer mem.Close()
		free <- mem
	}
	st := &streams{ids: map[string]uint32{}, last: map[uint32][]byte{}, single: map[string][]byte{},
		buf: z.NewBuffer(64<<20, "badger.Load")}
	defer func() { _ = st.buf.Release() }()
	var sendErr error
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for mem := range full {
			if sendErr == nil {
				sendErr = st.send(sw, mem)
			}
			if sendErr == nil {
				sendErr = mem.DropAll()
			}
			free <- mem
		}
	}()
	stopSending := sync.OnceValue(func() error {
		close(full)
		<-sent
		return sendErr
	})
	defer func() {
		if serr := stopSending(); err == nil {
			err = serr
		}
	}()
	// scratch keeps the revision state from chunk to chunk.
	scratch := &Store{db: <-free, dir: dir}
	if err := scratch.checkSchema(false); err != nil {
		return 0, err
	}
	chunk := make([]*model.Task, 0, loadChunk)
	lastID := ""
	flush := func() error {
		if err := createAll(scratch, chunk); err != nil {
			return err
		}
		n += len(chunk)
		chunk = chunk[:0]
		full <- scratch.db
		scratch.db = <-free
		return nil
	}
	for rec := range records {
		switch {
		case rec.ID <= lastID:
			return n, fmt.Errorf("store %s: Load needs ids in increasing order (%s after %s)", dir, rec.ID, lastID)
		case rec.IdempotencyKey != "":
			return n, fmt.Errorf("store %s: Load takes no idempotency key (task %s)", dir, rec.ID)
		}
		lastID = rec.ID
		if chunk = append(chunk, rec); len(chunk) == loadChunk {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := flush(); err != nil {
		return n, err
	}
	if err := stopSending(); err != nil {
		return n, err
	}
	if err := st.sendSingles(sw); err != nil {
		return n, err
	}
	return n, sw.Flush()
}

// loadWriters is how many Creates run at once in a scratch store: their
// marshalling runs on every core, and they share group commits as an
// engine's concurrent writes do (so, as there, revisions follow the
// order of the commits, not of the ids).
const loadWriters = 4

// createAll creates recs in s from loadWriters goroutines.
func createAll(s *Store, recs []*model.Task) error {
	var next atomic.Int64
	errs := make([]error, loadWriters)
	var wg sync.WaitGroup
	for w := range loadWriters {
		wg.Go(func() {
			for k := int(next.Add(1) - 1); k < len(recs) && errs[w] == nil; k = int(next.Add(1) - 1) {
				errs[w] = s.Create(recs[k])
			}
		})
	}
	wg.Wait()
	return firstOf(errs)
}

// streams routes keys to the StreamWriter's streams, one per key range
// whose keys later chunks only append to: each index (per status for the
// status index), the revision index, the audit log. A key that is its
// prefix alone (the schema, the floor, the counts) is rewritten by later
// chunks, so only its last value is sent, at the end.
type streams struct {
	ids    map[string]uint32
	last   map[uint32][]byte
	single map[string][]byte
	// buf holds a chunk's keys for the StreamWriter, which copies them:
	// one buffer serves every chunk (a new one costs a clear and its
	// growth a copy of every key and value).
	buf *z.Buffer
}

func (st *streams) id(key []byte) uint32 {
	name := key[:min(len(key), 2)]
	if bytes.HasPrefix(key, statusRoot) {
		if s, _, ok := splitStatusKey(key); ok {
			name = statusPrefix(s)
		}
	}
	id, ok := st.ids[string(name)]
	if !ok {
		id = uint32(len(st.ids) + 1)
		st.ids[string(name)] = id
	}
	return id
}

// send streams every key mem holds, but the singles, which it keeps.
func (st *streams) send(sw *badger.StreamWriter, mem *badger.DB) error {
	buf := st.buf
	buf.Reset()
	err := mem.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			key := item.KeyCopy(nil)
			if len(key) <= 2 {
				val, err := item.ValueCopy(nil)
				st.single[string(key)] = val
				if err != nil {
					return err
				}
				continue
			}
			id := st.id(key)
			if last := st.last[id]; last != nil && bytes.Compare(key, last) <= 0 {
				return fmt.Errorf("key %q comes after %q: the records are not in order", key, last)
			}
			st.last[id] = key
			err := item.Value(func(val []byte) error {
				badger.KVToBuffer(&pb.KV{Key: key, Value: val, Version: 1, StreamId: id}, buf)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return sw.Write(buf)
}

// sendSingles streams the last value of each single key, each a stream
// of its own: their ranges must not overlap the others'.
func (st *streams) sendSingles(sw *badger.StreamWriter) error {
	buf := st.buf
	buf.Reset()
	for key, val := range st.single {
		badger.KVToBuffer(&pb.KV{Key: []byte(key), Value: val, Version: 1, StreamId: st.id([]byte(key))}, buf)
	}
	return sw.Write(buf)
}
