package drives

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/bucketlog/bucketlog/localseg"
)

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// segmentFrames returns the start offset and kind of every whole frame of
// a segment file, stopping at the logical end (zeros or a torn frame).
func segmentFrames(b []byte) (starts []int, kinds []localseg.FrameKind) {
	for off := 0; off < len(b); {
		f, n, err := localseg.DecodeFrame(b[off:])
		if err != nil || n <= 0 {
			break
		}
		starts = append(starts, off)
		kinds = append(kinds, f.Kind)
		off += n
	}
	return starts, kinds
}

// firstSegment is the path of a shard's first segment file.
func firstSegment(shardDir string) string {
	return filepath.Join(shardDir, localseg.SegmentFileName(1))
}

// flipByte corrupts one byte inside the body of the first frame of a
// segment, so its CRC no longer matches.
func flipByte(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	starts, _ := segmentFrames(b)
	if len(starts) == 0 {
		return fmt.Errorf("%s holds no frame", path)
	}
	at := starts[0] + localseg.HeaderSize + 20
	b[at] ^= 0x01
	return os.WriteFile(path, b, 0o644)
}
