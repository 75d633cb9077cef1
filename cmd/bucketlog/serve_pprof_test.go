package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestServeDebugCPUProfile: the debugging variable writes a profile once
// stopped; unset, nothing is written; an unwritable path fails serve's start.
func TestServeDebugCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	env := map[string]string{envDebugCPUProfile: path}
	c := &cli{getenv: func(k string) string { return env[k] }}
	stop, err := c.startCPUProfile()
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("profile after stop: %v %v", fi, err)
	}
	env = map[string]string{}
	if stop, err := c.startCPUProfile(); err != nil {
		t.Fatal(err)
	} else {
		stop()
	}
	env = map[string]string{envDebugCPUProfile: filepath.Join(t.TempDir(), "missing", "cpu.pprof")}
	if _, err := c.startCPUProfile(); err == nil {
		t.Fatal("an unwritable profile path was accepted")
	}
}
