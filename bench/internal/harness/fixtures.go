package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Fixtures builds stores on demand and keeps them for the rest of the run,
// so sections that read the same store (open, replay, memory) build it once.
// It is safe for concurrent use, though sections run one at a time.
type Fixtures struct {
	root string
	mu   sync.Mutex
	dirs map[string]string
}

// NewFixtures keeps its stores under root.
func NewFixtures(root string) *Fixtures {
	return &Fixtures{root: root, dirs: map[string]string{}}
}

// Get returns the directory of the fixture key, calling build(dir) the
// first time. A failed build is not cached: the next Get retries it.
func (f *Fixtures) Get(key string, build func(dir string) error) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := f.dirs[key]; ok {
		return d, nil
	}
	dir := filepath.Join(f.root, fmt.Sprintf("fixture-%d", len(f.dirs)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := build(dir); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("build fixture %s: %w", key, err)
	}
	f.dirs[key] = dir
	return dir, nil
}
