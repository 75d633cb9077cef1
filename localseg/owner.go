package localseg

// This file is the writer-fencing record of a shard directory (docs/FORMAT.md,
// "Writer fencing"): owner.json names the ownership epoch this disk's writer
// claimed, the claim's nonce, and whether the epoch's cut (start record) is
// known to be in the bucket. The store itself never reads it; the engine
// does, through ReadOwner and WriteOwner, before the store opens.

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ownerName is the fencing record of a shard directory.
const ownerName = "owner.json"

// Owner is the body of owner.json.
type Owner struct {
	Epoch uint64 `json:"epoch"`
	Nonce string `json:"nonce"`
	Cut   bool   `json:"cut"`
}

func (o Owner) check() error {
	if o.Epoch == 0 {
		return errors.New("epoch 0")
	}
	if _, err := hex.DecodeString(o.Nonce); err != nil || len(o.Nonce) != 32 {
		return fmt.Errorf("nonce %q is not 32 hex characters", o.Nonce)
	}
	return nil
}

// ReadOwner reads dir's owner.json; ok is false when there is none. A
// record that does not parse is ErrCorrupt: the engine must not guess
// which epoch the disk owned.
func ReadOwner(fsys FS, dir string) (o Owner, ok bool, err error) {
	b, ok, err := readSmallFile(fsys, dir, ownerName, 1<<12)
	if err != nil || !ok {
		return Owner{}, false, err
	}
	name := filepath.Join(dir, ownerName)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return Owner{}, false, fmt.Errorf("%w: %s: %v", ErrCorrupt, name, err)
	}
	if err := o.check(); err != nil {
		return Owner{}, false, fmt.Errorf("%w: %s: %v", ErrCorrupt, name, err)
	}
	return o, true, nil
}

// WriteOwner durably replaces dir's owner.json (temp, fsync, rename,
// directory fsync), creating dir when it is missing (and syncing its
// parent then, so the record survives a crash).
func WriteOwner(fsys FS, dir string, o Owner) error {
	if err := o.check(); err != nil {
		return fmt.Errorf("localseg: owner record: %v", err)
	}
	data, err := json.Marshal(o)
	if err != nil {
		return err
	}
	_, serr := fsys.Stat(dir)
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("localseg: create %s: %w", dir, err)
	}
	if errors.Is(serr, fs.ErrNotExist) {
		if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {
			return fmt.Errorf("localseg: fsync directory %s: %w", filepath.Dir(dir), err)
		}
	}
	if err := writeDurably(fsys, dir, ownerName, data); err != nil {
		_ = fsys.Remove(filepath.Join(dir, ownerName+tmpSuffix))
		return err
	}
	return nil
}

// FencedDir is where a stale owner's shard directory is moved aside:
// `<dir>.fenced-<epoch>` (shard-NNNN.fenced-7), epoch being the one its
// owner.json names.
func FencedDir(dir string, epoch uint64) string {
	return filepath.Clean(dir) + ".fenced-" + strconv.FormatUint(epoch, 10)
}

// MoveAsideFenced renames dir to FencedDir(dir, epoch) and syncs the parent,
// so the next open finds an empty disk. An existing target is an error
// (nothing is overwritten).
func MoveAsideFenced(fsys FS, dir string, epoch uint64) (string, error) {
	to := FencedDir(dir, epoch)
	if _, err := fsys.Stat(to); err == nil {
		return "", fmt.Errorf("localseg: %s already exists; move it away to set %s aside", to, dir)
	}
	if err := fsys.Rename(dir, to); err != nil {
		return "", fmt.Errorf("localseg: move %s aside: %w", dir, err)
	}
	if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {
		return "", fmt.Errorf("localseg: fsync directory %s: %w", filepath.Dir(dir), err)
	}
	return to, nil
}

// TakeoverStagingDir is the sibling directory a takeover hydrates into
// before it replaces dir (which holds only owner.json meanwhile).
func TakeoverStagingDir(dir string) string {
	dir = filepath.Clean(dir)
	return filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".takeover")
}

// ReplaceWithStaged makes staged (a complete store with its owner.json)
// the shard directory dir, whose contents are only an owner.json: dir is
// renamed out of the way, staged renamed into its place, the parent synced,
// and the old directory removed. A crash in between leaves either the old
// dir, or no dir at all (the next open then sees an empty disk and claims
// again, which is safe: an epoch that never cut acknowledged nothing).
func ReplaceWithStaged(fsys FS, staged, dir string) error {
	dir = filepath.Clean(dir)
	old := filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".replaced")
	if err := RemoveTree(fsys, old); err != nil {
		return err
	}
	if _, err := fsys.Stat(dir); err == nil {
		if err := fsys.Rename(dir, old); err != nil {
			return fmt.Errorf("localseg: move %s out of the way: %w", dir, err)
		}
	}
	if err := fsys.Rename(staged, dir); err != nil {
		return fmt.Errorf("localseg: rename %s to %s: %w", staged, dir, err)
	}
	if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {
		return fmt.Errorf("localseg: fsync directory %s: %w", filepath.Dir(dir), err)
	}
	return RemoveTree(fsys, old)
}

// RemoveStaged removes a leftover staging directory (a crashed takeover's).
func RemoveStaged(fsys FS, staged string) error { return RemoveTree(fsys, staged) }

// RemoveTree removes path and everything under it through fsys (an FS has
// no RemoveAll of its own). A missing path is success.
func RemoveTree(fsys FS, path string) error {
	fi, err := fsys.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		names, err := fsys.ReadDir(path)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := RemoveTree(fsys, filepath.Join(path, n)); err != nil {
				return err
			}
		}
	}
	if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("localseg: remove %s: %w", path, err)
	}
	return nil
}

// FencedEpochs lists the epochs of dir's moved-aside directories
// (FencedDir(dir, e) for each e), in ascending order.
func FencedEpochs(dir string) ([]uint64, error) {
	dir = filepath.Clean(dir)
	entries, err := os.ReadDir(filepath.Dir(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	prefix := filepath.Base(dir) + ".fenced-"
	var out []uint64
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() {
			continue
		}
		if n, err := strconv.ParseUint(rest, 10, 64); err == nil && FencedDir(dir, n) == filepath.Join(filepath.Dir(dir), e.Name()) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// RemoveFenced removes the moved-aside directory FencedDir(dir, epoch) and
// everything in it, then syncs the parent.
func RemoveFenced(fsys FS, dir string, epoch uint64) error {
	to := FencedDir(dir, epoch)
	if _, err := fsys.Stat(to); err != nil {
		return fmt.Errorf("localseg: %s: %w", to, err)
	}
	if err := RemoveTree(fsys, to); err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(to))
}
