package targets

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/bucketlog/bucketlog/localseg"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	tidwal "github.com/tidwall/wal"
)

// BuildBatch is how many events one durable batch writes while a fixture is
// built. Building is not timed; batching keeps a 1M-event build to seconds.
const BuildBatch = 1000

// System is a log as a whole store: built once with N events, then opened
// for append, or opened and read back from the first record to the last.
type System struct {
	Name string
	// Build writes n events with payload p spread round-robin over execs
	// execution ids into the empty directory dir, durably, and closes.
	Build func(dir string, n int, p *Payload, execs int) error
	// OpenForAppend opens the store ready to append and reports how long
	// Open took; the close after it is not timed. Note says what the open
	// did (bucketlog: whether it replayed).
	OpenForAppend func(dir string) (d time.Duration, note string, err error)
	// Replay opens the store and reads every record back, checking each
	// payload's length, and returns how many it read.
	Replay func(dir string, payloadLen int) (uint64, error)
}

// Systems lists bucketlog and the peers.
func Systems() []System {
	return []System{
		{Name: "bucketlog", Build: buildBucketlog, OpenForAppend: openBucketlogTimed, Replay: replayBucketlog},
		{Name: "tidwall-wal", Build: buildTidwall, OpenForAppend: openTidwallTimed, Replay: replayTidwall},
		{Name: "raft-wal", Build: buildRaftWAL, OpenForAppend: openRaftWALTimed, Replay: replayRaftWAL},
	}
}

// BucketlogStoreDir is where a bucketlog fixture in dir keeps its shard.
func BucketlogStoreDir(dir string) string { return localseg.ShardDir(dir, 0) }

func buildBucketlog(dir string, n int, p *Payload, execs int) error {
	st, err := localseg.Open(BucketlogStoreDir(dir), localseg.Options{})
	if err != nil {
		return err
	}
	ids := ExecIDs(execs)
	batch := make([]localseg.Event, 0, BuildBatch)
	for i := 0; i < n; {
		batch = batch[:0]
		for ; len(batch) < BuildBatch && i < n; i++ {
			batch = append(batch, localseg.Event{ExecutionID: ids[i%len(ids)], TransactionID: TxnID(uint64(i + 1)), Payload: p.S})
		}
		if _, _, err := st.AppendBatch(batch); err != nil {
			st.Close()
			return err
		}
	}
	if tip := st.Tip(); tip != uint64(n) {
		st.Close()
		return fmt.Errorf("bucketlog tip %d after building %d events", tip, n)
	}
	return st.Close()
}

func openBucketlogTimed(dir string) (time.Duration, string, error) {
	// The store's I/O during the open is counted through its FS seam: an
	// open that only trusts its checkpoint needs no barrier to be correct,
	// so any here is time the O(1) promise pays.
	var io IOCounts
	t0 := time.Now()
	st, err := localseg.Open(BucketlogStoreDir(dir), localseg.Options{FS: newCountingFS(&io)})
	d := time.Since(t0)
	if err != nil {
		return 0, "", err
	}
	rep := st.OpenReport()
	note := fmt.Sprintf("replayed=%v %s", rep.Replayed, io.String())
	if rep.TornTailBytes != 0 {
		note += fmt.Sprintf(" torn=%d", rep.TornTailBytes)
	}
	return d, note, st.Close()
}

// ScanPage is the page size of a bucketlog replay.
const ScanPage = 10000

func replayBucketlog(dir string, payloadLen int) (uint64, error) {
	st, err := localseg.Open(BucketlogStoreDir(dir), localseg.Options{})
	if err != nil {
		return 0, err
	}
	var after, n uint64
	for {
		pg, err := st.Scan(after, ScanPage)
		if err != nil {
			st.Close()
			return n, err
		}
		if len(pg.Records) == 0 {
			break
		}
		for i := range pg.Records {
			if len(pg.Records[i].Payload) != payloadLen {
				st.Close()
				return n, fmt.Errorf("seq %d: payload of %d bytes, want %d", pg.Records[i].Seq, len(pg.Records[i].Payload), payloadLen)
			}
		}
		n += uint64(len(pg.Records))
		after = pg.Records[len(pg.Records)-1].Seq
	}
	return n, st.Close()
}

func buildTidwall(dir string, n int, p *Payload, _ int) error {
	l, err := tidwal.Open(filepath.Join(dir, "tidwall"), tidwallOptions())
	if err != nil {
		return err
	}
	b := new(tidwal.Batch)
	for i := 1; i <= n; {
		b.Clear()
		for j := 0; j < BuildBatch && i <= n; j, i = j+1, i+1 {
			b.Write(uint64(i), p.B)
		}
		if err := l.WriteBatch(b); err != nil {
			l.Close()
			return err
		}
	}
	return l.Close()
}

func openTidwallTimed(dir string) (time.Duration, string, error) {
	t0 := time.Now()
	l, err := tidwal.Open(filepath.Join(dir, "tidwall"), tidwallOptions())
	d := time.Since(t0)
	if err != nil {
		return 0, "", err
	}
	return d, "", l.Close()
}

func replayTidwall(dir string, payloadLen int) (uint64, error) {
	l, err := tidwal.Open(filepath.Join(dir, "tidwall"), tidwallOptions())
	if err != nil {
		return 0, err
	}
	first, err := l.FirstIndex()
	if err != nil {
		l.Close()
		return 0, err
	}
	last, err := l.LastIndex()
	if err != nil {
		l.Close()
		return 0, err
	}
	var n uint64
	for i := first; i <= last && last != 0; i++ {
		b, err := l.Read(i)
		if err != nil {
			l.Close()
			return n, err
		}
		if len(b) != payloadLen {
			l.Close()
			return n, fmt.Errorf("index %d: payload of %d bytes, want %d", i, len(b), payloadLen)
		}
		n++
	}
	return n, l.Close()
}

func raftWALDir(dir string) string { return filepath.Join(dir, "raftwal") }

// raftWAL is an open raft-wal with its meta store. WAL.Close (v0.4.0) does
// not close the BoltDB meta store it opened, and bbolt's flock then blocks
// the next Open of the same directory in this process for ever, so the
// bench supplies the meta store and closes it after the WAL.
type raftWAL struct {
	*raftwal.WAL
	meta *metadb.BoltMetaDB
}

func (w raftWAL) Close() error {
	err := w.WAL.Close()
	if merr := w.meta.Close(); err == nil {
		err = merr
	}
	return err
}

func openRaftWALStore(dir string) (raftWAL, error) {
	if err := os.MkdirAll(raftWALDir(dir), 0o755); err != nil {
		return raftWAL{}, err
	}
	meta := &metadb.BoltMetaDB{}
	w, err := raftwal.Open(raftWALDir(dir), raftwal.WithLogger(hclog.NewNullLogger()), raftwal.WithMetaStore(meta))
	if err != nil {
		meta.Close()
		return raftWAL{}, err
	}
	return raftWAL{WAL: w, meta: meta}, nil
}

func buildRaftWAL(dir string, n int, p *Payload, _ int) error {
	w, err := openRaftWALStore(dir)
	if err != nil {
		return err
	}
	logs := make([]*raft.Log, 0, BuildBatch)
	for i := 1; i <= n; {
		logs = logs[:0]
		for ; len(logs) < BuildBatch && i <= n; i++ {
			logs = append(logs, &raft.Log{Index: uint64(i), Term: 1, Type: raft.LogCommand, Data: p.B})
		}
		if err := w.StoreLogs(logs); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}

func openRaftWALTimed(dir string) (time.Duration, string, error) {
	t0 := time.Now()
	w, err := openRaftWALStore(dir)
	d := time.Since(t0)
	if err != nil {
		return 0, "", err
	}
	return d, "", w.Close()
}

func replayRaftWAL(dir string, payloadLen int) (uint64, error) {
	w, err := openRaftWALStore(dir)
	if err != nil {
		return 0, err
	}
	first, err := w.FirstIndex()
	if err != nil {
		w.Close()
		return 0, err
	}
	last, err := w.LastIndex()
	if err != nil {
		w.Close()
		return 0, err
	}
	var n uint64
	var l raft.Log
	for i := first; i <= last && last != 0; i++ {
		if err := w.GetLog(i, &l); err != nil {
			w.Close()
			return n, err
		}
		if len(l.Data) != payloadLen {
			w.Close()
			return n, fmt.Errorf("index %d: payload of %d bytes, want %d", i, len(l.Data), payloadLen)
		}
		n++
	}
	return n, w.Close()
}
