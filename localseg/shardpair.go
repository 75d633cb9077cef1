package localseg

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"strconv"
)

// The shard pair.
//
// A store's history holds the executions that its shard pair routes to it:
// reopened as another pair (shard 0 of 1 as shard 0 of 2), it would hold
// executions another shard owns and serve them as its own. So a writable
// open that is told the pair (Options.Shard) records it in shard.json,
//
//	{"shard_index":N,"shard_count":M,"crc32":C}
//
// (C is the CRC-32 IEEE of the same document without the crc32 member),
// written through a temporary file, fsynced, renamed and the directory
// fsynced, right after the store's first segment and checkpoint; and every
// open told a pair compares it first, before it changes anything, and
// refuses another pair with ErrShardMismatch. A store without shard.json
// (written before it existed, hydrated from a bucket, or created by a
// process that died before writing it) adopts the pair of its first
// writable open. It is not written before the first segment because a
// directory holding only LOCK is what a crash before the first segment
// leaves, and a cold load adopts exactly that as empty. An open not told a
// pair (Options.Shard zero) neither checks nor writes it. A shard.json that
// does not parse is corruption: remove it to let the next writable open
// adopt its pair again.

// shardName is the shard pair record in a store directory.
const shardName = "shard.json"

// ErrShardMismatch reports a store opened as another shard pair than the
// one it records.
var ErrShardMismatch = errors.New("localseg: the store belongs to another shard pair")

func (p ShardPair) String() string { return fmt.Sprintf("shard %d of %d", p.Index, p.Count) }

func appendShardBody(dst []byte, p ShardPair) []byte {
	dst = append(dst, `{"shard_index":`...)
	dst = strconv.AppendInt(dst, int64(p.Index), 10)
	dst = append(dst, `,"shard_count":`...)
	dst = strconv.AppendInt(dst, int64(p.Count), 10)
	return dst
}

func (p ShardPair) encode() []byte {
	body := append(appendShardBody(nil, p), '}')
	sum := crc32.ChecksumIEEE(body)
	b := appendShardBody(nil, p)
	b = append(b, `,"crc32":`...)
	b = strconv.AppendUint(b, uint64(sum), 10)
	return append(b, "}\n"...)
}

func parseShardPair(b []byte) (ShardPair, error) {
	var raw struct {
		Index *int    `json:"shard_index"`
		Count *int    `json:"shard_count"`
		CRC   *uint32 `json:"crc32"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return ShardPair{}, err
	}
	if raw.Index == nil || raw.Count == nil || raw.CRC == nil {
		return ShardPair{}, errors.New("missing field")
	}
	p := ShardPair{Index: *raw.Index, Count: *raw.Count}
	if p.Count < 1 || p.Index < 0 || p.Index >= p.Count {
		return ShardPair{}, fmt.Errorf("%s is not a valid pair", p)
	}
	if crc32.ChecksumIEEE(append(appendShardBody(nil, p), '}')) != *raw.CRC {
		return ShardPair{}, errors.New("crc32 mismatch")
	}
	return p, nil
}

// readShardPair reads shard.json; ok is false when there is none.
func readShardPair(fsys FS, dir string) (p ShardPair, ok bool, err error) {
	b, ok, err := readSmallFile(fsys, dir, shardName, 1<<12)
	if errors.Is(err, ErrCorrupt) {
		return ShardPair{}, false, fmt.Errorf("%w; remove it to record the shard pair again", err)
	}
	if err != nil || !ok {
		return ShardPair{}, false, err
	}
	name := filepath.Join(dir, shardName)
	if p, err = parseShardPair(b); err != nil {
		return ShardPair{}, false, fmt.Errorf("%w: %s: %v; remove it to record the shard pair again", ErrCorrupt, name, err)
	}
	return p, true, nil
}

// writeShardPair durably writes shard.json (a failed write leaves no
// temporary file behind).
func writeShardPair(fsys FS, dir string, p ShardPair) error {
	err := writeDurably(fsys, dir, shardName, p.encode())
	if err != nil {
		_ = fsys.Remove(filepath.Join(dir, shardName+tmpSuffix))
	}
	return err
}

// checkShardPair compares the recorded pair with the one the open was
// told (nothing to do when it was told none). recorded reports whether
// there is a record.
func (s *Store) checkShardPair() (recorded bool, err error) {
	if s.shard.Count == 0 {
		return false, nil
	}
	p, ok, err := readShardPair(s.fs, s.dir)
	if err != nil || !ok {
		return false, err
	}
	if p != s.shard {
		return true, fmt.Errorf("%w: %s was written as %s and is opened as %s; a store keeps the pair it was written with (its history holds the executions that pair routes to it): open it as %s, or restore the bucket into a new directory to re-shard",
			ErrShardMismatch, s.dir, p, s.shard, p)
	}
	return true, nil
}

// recordShardPair writes the pair the writable open was told when the store
// records none (a new store, or one that adopts it). A failure fails the
// open like any write error at open (the store is sound without the
// record; the next writable open tries again).
func (s *Store) recordShardPair() error {
	if s.shard.Count == 0 || s.readOnly || s.shardRecorded {
		return nil
	}
	if err := writeShardPair(s.fs, s.dir, s.shard); err != nil {
		return fmt.Errorf("localseg: record %s: %w", s.shard, err)
	}
	s.shardRecorded = true
	return nil
}
