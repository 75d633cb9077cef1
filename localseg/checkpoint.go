package localseg

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/bucketlog/bucketlog/frame"
)

// checkpoint is the content of checkpoint.json: a cache of the state an
// append needs, valid for a segment directory whose highest segment is
// ActiveSegmentID and holds exactly ActiveLen bytes of frames.
//
// On disk it is
//
//	{"event_count":N,"active_segment_id":N,"active_len":N,"consumers_seen":[…],"consumer_acks":{…},"crc32":N}
//
// followed by blanks up to the length of the longest earlier version (it is
// rewritten in place). consumers_seen lists every live consumer and
// consumer_acks the cursors above 0, both sorted by name. crc32 is the CRC-32
// IEEE of the same document with the crc32 member left out; it is what lets
// a torn or garbled rewrite (the file is written without fsync, and a crash
// may keep any subset of its sectors) fail to parse instead of being
// trusted.
type checkpoint struct {
	EventCount      uint64
	ActiveSegmentID uint64
	ActiveLen       int64
	Consumers       map[string]uint64
}

// appendCheckpoint appends the encoding of the state to dst; names are the
// keys of cons, sorted.
func appendCheckpoint(dst []byte, eventCount, activeID uint64, activeLen int64, names []string, cons map[string]uint64) []byte {
	start := len(dst)
	dst = appendCheckpointBody(dst, eventCount, activeID, activeLen, names, cons)
	dst = append(dst, '}')
	sum := crc32.ChecksumIEEE(dst[start:])
	dst = dst[:len(dst)-1]
	dst = append(dst, `,"crc32":`...)
	dst = strconv.AppendUint(dst, uint64(sum), 10)
	return append(dst, "}\n"...)
}

func appendCheckpointBody(dst []byte, eventCount, activeID uint64, activeLen int64, names []string, cons map[string]uint64) []byte {
	dst = append(dst, `{"event_count":`...)
	dst = strconv.AppendUint(dst, eventCount, 10)
	dst = append(dst, `,"active_segment_id":`...)
	dst = strconv.AppendUint(dst, activeID, 10)
	dst = append(dst, `,"active_len":`...)
	dst = strconv.AppendInt(dst, activeLen, 10)
	dst = append(dst, `,"consumers_seen":[`...)
	for i, n := range names {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = frame.AppendEscaped(dst, n)
	}
	dst = append(dst, `],"consumer_acks":{`...)
	first := true
	for _, n := range names {
		c := cons[n]
		if c == 0 {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = frame.AppendEscaped(dst, n)
		dst = append(dst, ':')
		dst = strconv.AppendUint(dst, c, 10)
	}
	return append(dst, '}')
}

// encode returns the checkpoint's file content.
func (c *checkpoint) encode() []byte {
	names := slices.Sorted(maps.Keys(c.Consumers))
	return appendCheckpoint(nil, c.EventCount, c.ActiveSegmentID, c.ActiveLen, names, c.Consumers)
}

// parseCheckpoint parses checkpoint.json. Anything short of a complete,
// self-consistent document with a matching crc32 is an error: the caller
// then replays, which is always correct.
func parseCheckpoint(b []byte) (checkpoint, error) {
	var raw struct {
		EventCount      *uint64           `json:"event_count"`
		ActiveSegmentID *uint64           `json:"active_segment_id"`
		ActiveLen       *int64            `json:"active_len"`
		ConsumersSeen   []string          `json:"consumers_seen"`
		ConsumerAcks    map[string]uint64 `json:"consumer_acks"`
		CRC             *uint32           `json:"crc32"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	switch {
	case raw.EventCount == nil || raw.ActiveSegmentID == nil || raw.ActiveLen == nil || raw.CRC == nil:
		return checkpoint{}, fmt.Errorf("checkpoint: missing field")
	case *raw.ActiveSegmentID == 0 || *raw.ActiveLen < 0 || *raw.ActiveLen > MaxSegmentBytes:
		return checkpoint{}, fmt.Errorf("checkpoint: active segment %d, length %d out of range", *raw.ActiveSegmentID, *raw.ActiveLen)
	}
	c := checkpoint{
		EventCount:      *raw.EventCount,
		ActiveSegmentID: *raw.ActiveSegmentID,
		ActiveLen:       *raw.ActiveLen,
		Consumers:       make(map[string]uint64, len(raw.ConsumersSeen)),
	}
	for _, n := range raw.ConsumersSeen {
		if v, err := validateName("consumer", n); err != nil || v != n {
			return checkpoint{}, fmt.Errorf("checkpoint: bad consumer name %s", quoteShort(n))
		}
		c.Consumers[n] = 0
	}
	for n, v := range raw.ConsumerAcks {
		if _, ok := c.Consumers[n]; !ok || v > c.EventCount {
			return checkpoint{}, fmt.Errorf("checkpoint: ack of %s at %d is not consistent", quoteShort(n), v)
		}
		c.Consumers[n] = v
	}
	// The CRC covers the canonical encoding of what was parsed, so any
	// difference from what the writer wrote (a torn sector, a duplicate, a
	// hand edit) shows.
	names := slices.Sorted(maps.Keys(c.Consumers))
	body := appendCheckpointBody(nil, c.EventCount, c.ActiveSegmentID, c.ActiveLen, names, c.Consumers)
	body = append(body, '}')
	if crc32.ChecksumIEEE(body) != *raw.CRC {
		return checkpoint{}, fmt.Errorf("checkpoint: crc32 mismatch")
	}
	return c, nil
}

// checkpointMaxLag bounds how long an unbroken chain of groups leaves
// checkpoint.json behind.
const checkpointMaxLag = 10 * time.Millisecond

// writeCheckpointLocked encodes the durable state and writes it over
// checkpoint.json (no fsync: it is a cache). The caller holds s.mu and the
// writer role; s.mu is released during the write. An error poisons the
// store (a write error is a write error, docs/FORMAT.md §4.1).
func (s *Store) writeCheckpointLocked() error {
	s.encodeCheckpointLocked()
	s.mu.Unlock()
	err := s.writeCheckpoint(false)
	s.mu.Lock()
	if err != nil {
		s.poisonLocked(err)
		return s.poison
	}
	return nil
}
