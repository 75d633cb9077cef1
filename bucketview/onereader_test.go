package bucketview_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestOneReaderOfTheBucketState: the packages that judge a shard's bucket
// state (the engine, its shipper, its takeover, cold loads, reclaim,
// inspect) list the bucket only through Read, so there is one rule for
// which keys are understood and in what order the parts are read (the
// fencing parts after the data listings).
func TestOneReaderOfTheBucketState(t *testing.T) {
	listCall := regexp.MustCompile(`\.List\(\s*ctx`)
	for _, dir := range []string{"..", "../shipper", "../takeover", "../coldload", "../reclaim", "../inspect"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("%s: no Go files (moved?)", dir)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(string(src), "\n") {
				if listCall.MatchString(line) {
					t.Errorf("%s:%d lists the bucket by hand (use bucketview.Read): %s", f, i+1, strings.TrimSpace(line))
				}
			}
		}
	}
}
