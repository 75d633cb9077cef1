package harness

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Machine describes where a run took place.
type Machine struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go"`
	Dir       string `json:"dir"`
	FSType    string `json:"fs_type"`
	Device    string `json:"device"`
	// SameFSAsRepo says whether the scratch directory is on the same
	// filesystem as the tree being measured.
	SameFSAsRepo bool   `json:"same_fs_as_repo"`
	LoadStart    string `json:"load_start"`
	LoadEnd      string `json:"load_end,omitempty"`
	GitHead      string `json:"git_head,omitempty"`
	GitDirty     bool   `json:"git_dirty,omitempty"`
	MemTotalKB   int64  `json:"mem_total_kb"`
}

// DescribeMachine reads /proc and uname for the machine facts and the
// filesystem holding dir.
func DescribeMachine(dir, repo string) Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), Dir: dir}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:])
	}
	m.FSType, m.Device = fsOf(dir)
	if abs, err := filepath.Abs(repo); err == nil {
		_, repoDev := fsOf(abs)
		m.SameFSAsRepo = repoDev != "" && repoDev == m.Device
	}
	m.LoadStart = LoadAvg()
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				m.MemTotalKB = parseKB(line)
			}
		}
	}
	if out, err := exec.Command("git", "-C", repo, "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		m.GitHead = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "-C", repo, "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
			m.GitDirty = len(strings.TrimSpace(string(st))) > 0
		}
	}
	return m
}

// LoadAvg is the first three fields of /proc/loadavg.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// fsOf finds the mount holding dir in /proc/self/mounts (the longest
// mount-point prefix of its resolved path) and returns its type and device.
func fsOf(dir string) (fstype, device string) {
	p, err := filepath.EvalSymlinks(dir)
	if err != nil {
		p = dir
	}
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return "unknown", ""
	}
	best := -1
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		mp := strings.ReplaceAll(f[1], `\040`, " ")
		if p == mp || strings.HasPrefix(p, strings.TrimSuffix(mp, "/")+"/") {
			if len(mp) > best {
				best, fstype, device = len(mp), f[2], f[0]
			}
		}
	}
	if best < 0 {
		return "unknown", ""
	}
	return fstype, device
}

// IsMemoryFS reports whether dir is on a filesystem whose fsync proves
// nothing about a disk.
func IsMemoryFS(dir string) bool {
	t, _ := fsOf(dir)
	return t == "tmpfs" || t == "ramfs"
}

func parseKB(line string) int64 {
	var n int64
	for _, f := range strings.Fields(line) {
		var v int64
		ok := len(f) > 0
		for _, c := range f {
			if c < '0' || c > '9' {
				ok = false
				break
			}
			v = v*10 + int64(c-'0')
		}
		if ok {
			n = v
			break
		}
	}
	return n
}

// ProcStatusKB reads one "Key:   N kB" field of /proc/self/status
// (VmHWM is the peak resident set size, VmRSS the current one).
func ProcStatusKB(key string) (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, key+":") {
			return parseKB(line), nil
		}
	}
	return 0, os.ErrNotExist
}
