// Package inspect describes a shard directory without changing it: its
// segments, checkpoint, reclaim manifest, consumers, and any torn tail or
// corruption (the inspect command).
package inspect

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/bucketlog/bucketlog/frame"
	"github.com/bucketlog/bucketlog/localseg"
)

// Report describes a shard directory without changing it.
type Report struct {
	Dir        string            `json:"dir"`
	Exists     bool              `json:"exists"`
	Bucket     string            `json:"bucket,omitempty"`
	Tip        uint64            `json:"tip"`
	Base       uint64            `json:"base"`
	Segments   []Segment         `json:"segments"`
	Checkpoint json.RawMessage   `json:"checkpoint"`
	Reclaim    json.RawMessage   `json:"reclaim_manifest"`
	Consumers  map[string]uint64 `json:"consumers"`
	// TornTailBytes would be dropped by the owner's next writable open.
	TornTailBytes   int64  `json:"torn_tail_bytes"`
	TornTailSegment uint64 `json:"torn_tail_segment,omitempty"`
	// Problems lists corruption found (segment, offset, what).
	Problems []string `json:"problems"`
}

// Segment is one segment file.
type Segment struct {
	ID       uint64 `json:"id"`
	Bytes    int64  `json:"bytes"`
	Frames   int    `json:"frames"`
	Events   int    `json:"events"`
	FirstSeq uint64 `json:"first_sequence"`
	LastSeq  uint64 `json:"last_sequence"`
	Sealed   bool   `json:"sealed"`
	// Remote: evicted to the bucket (localseg evict.go); its file is gone
	// and its frames are not read here (Frames is 0).
	Remote bool `json:"remote"`
}

// Dir reads a shard directory read-only: segments, sizes, frame counts,
// the checkpoint, the reclaim manifest, and any torn tail or corruption.
// bucket is the bucket the directory records (bucket.json), if any.
func Dir(dir, bucket string) (Report, error) {
	rep := Report{Dir: dir, Bucket: bucket, Segments: []Segment{}, Problems: []string{}}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return rep, nil
	}
	rep.Exists = true
	rep.Checkpoint = rawJSON(localseg.ReadCheckpointFile(dir))
	rep.Reclaim = rawJSON(localseg.ReadReclaimManifestFile(dir))
	st, err := localseg.Open(dir, localseg.Options{ReadOnly: true})
	if err != nil {
		rep.Problems = append(rep.Problems, err.Error())
		return rep, nil
	}
	defer st.Close()
	or := st.OpenReport()
	rep.TornTailBytes, rep.TornTailSegment = or.TornTailBytes, or.TornTailSegment
	snap, err := st.Snapshot()
	if err != nil {
		rep.Problems = append(rep.Problems, err.Error())
		return rep, nil
	}
	rep.Tip, rep.Base, rep.Consumers = snap.Tip, snap.ReclaimedSeq+1, snap.Consumers
	for _, seg := range snap.Segments {
		is := Segment{ID: seg.ID, Bytes: seg.Size, Events: seg.Events, FirstSeq: seg.FirstSeq, LastSeq: seg.LastSeq, Sealed: seg.Sealed}
		if is.Remote = st.IsEvicted(seg.ID); is.Remote {
			rep.Segments = append(rep.Segments, is)
			continue
		}
		data, err := st.ReadRange(seg.ID, 0, seg.Size)
		if err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("segment %d: %v", seg.ID, err))
		} else if sum, err := frame.VerifySegment(seg.ID, data, 0); err != nil {
			rep.Problems = append(rep.Problems, err.Error())
		} else {
			is.Frames = sum.Frames
		}
		rep.Segments = append(rep.Segments, is)
	}
	return rep, nil
}

func rawJSON(b []byte, err error) json.RawMessage {
	if b == nil || err != nil {
		return json.RawMessage("null")
	}
	// checkpoint.json may be padded with blanks; only valid JSON is shown.
	var v any
	if json.Unmarshal(b, &v) != nil {
		return json.RawMessage(`"(unreadable)"`)
	}
	out, _ := json.Marshal(v)
	return out
}
