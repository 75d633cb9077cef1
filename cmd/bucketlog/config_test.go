package main

import (
	"errors"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/localseg"
)

func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

// TestConfigFromEnvTable covers every variable of the README's Configuration table: unset, empty and
// unknown values keep the default (with a warning for the unknown ones),
// and only well-formed values change anything.
func TestConfigFromEnvTable(t *testing.T) {
	def, err := ConfigFromEnv(envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if def.Backend != BackendDurableSegment || def.GC.Enabled || def.GC.MinRetainedSegments != 2 || def.GC.MaxRetainedSegments != 0 ||
		def.GC.Interval != 0 || def.SegmentMaxBytes != bucketlog.DefaultSegmentMaxBytes || def.SealMaxAge != 900*time.Second ||
		!def.TailReplication || def.TailInterval != 15*time.Second || !def.TailCleanup || def.ShardIndex != 0 ||
		def.ShardCount != 1 || def.BucketURL != "" || len(def.Warnings) != 0 {
		t.Fatalf("defaults: %+v", def)
	}
	type row struct {
		name  string
		env   map[string]string
		check func(Config) bool
		warns bool
	}
	rows := []row{
		{"backend local_reference", map[string]string{EnvBackend: "local_reference"}, func(c Config) bool { return c.Backend == BackendLocalReference }, false},
		{"backend blank", map[string]string{EnvBackend: "  "}, func(c Config) bool { return c.Backend == BackendDurableSegment }, false},
		{"backend unknown", map[string]string{EnvBackend: "Local_Reference"}, func(c Config) bool { return c.Backend == BackendDurableSegment }, true},
		{"gc consumer_ack", map[string]string{EnvGC: "consumer_ack"}, func(c Config) bool { return c.GC.Enabled }, false},
		{"gc on", map[string]string{EnvGC: "on"}, func(c Config) bool { return c.GC.Enabled }, false},
		{"gc enabled", map[string]string{EnvGC: "enabled"}, func(c Config) bool { return c.GC.Enabled }, false},
		{"gc unknown stays off", map[string]string{EnvGC: "yes please"}, func(c Config) bool { return !c.GC.Enabled }, true},
		{"gc empty stays off", map[string]string{EnvGC: ""}, func(c Config) bool { return !c.GC.Enabled }, false},
		{"min retained", map[string]string{EnvGCMinRetained: "4"}, func(c Config) bool { return c.GC.MinRetainedSegments == 4 }, false},
		{"min retained garbage", map[string]string{EnvGCMinRetained: "-1"}, func(c Config) bool { return c.GC.MinRetainedSegments == 2 }, true},
		{"max retained", map[string]string{EnvGCMaxRetained: "5"}, func(c Config) bool { return c.GC.MaxRetainedSegments == 5 }, false},
		{"max retained zero keeps interest only", map[string]string{EnvGCMaxRetained: "0"}, func(c Config) bool { return c.GC.MaxRetainedSegments == 0 }, true},
		{"gc interval", map[string]string{EnvGCInterval: "30"}, func(c Config) bool { return c.GC.Interval == 30*time.Second }, false},
		{"gc interval garbage", map[string]string{EnvGCInterval: "soon"}, func(c Config) bool { return c.GC.Interval == 0 }, true},
		{"segment size", map[string]string{EnvSegmentMaxBytes: "1048576"}, func(c Config) bool { return c.SegmentMaxBytes == 1<<20 }, false},
		{"segment size clamped", map[string]string{EnvSegmentMaxBytes: "99999999999"}, func(c Config) bool { return c.SegmentMaxBytes == localseg.MaxSegmentBytes }, true},
		{"segment size garbage", map[string]string{EnvSegmentMaxBytes: "8MB"}, func(c Config) bool { return c.SegmentMaxBytes == bucketlog.DefaultSegmentMaxBytes }, true},
		{"seal age", map[string]string{EnvSealMaxAge: "60"}, func(c Config) bool { return c.SealMaxAge == time.Minute }, false},
		{"seal age garbage", map[string]string{EnvSealMaxAge: "0"}, func(c Config) bool { return c.SealMaxAge == 900*time.Second }, true},
		{"tail replication off", map[string]string{EnvTailReplication: "off"}, func(c Config) bool { return !c.TailReplication }, false},
		{"tail replication unknown stays on", map[string]string{EnvTailReplication: "maybe"}, func(c Config) bool { return c.TailReplication }, true},
		{"tail interval", map[string]string{EnvTailInterval: "5"}, func(c Config) bool { return c.TailInterval == 5*time.Second }, false},
		{"tail interval garbage", map[string]string{EnvTailInterval: "-5"}, func(c Config) bool { return c.TailInterval == 15*time.Second }, true},
		{"tail cleanup off", map[string]string{EnvTailCleanup: "off"}, func(c Config) bool { return !c.TailCleanup }, false},
		{"tail cleanup unknown stays on", map[string]string{EnvTailCleanup: "nah"}, func(c Config) bool { return c.TailCleanup }, true},
		{"shard pair", map[string]string{EnvShardIndex: "1", EnvShardCount: "4"}, func(c Config) bool { return c.ShardIndex == 1 && c.ShardCount == 4 }, false},
		{"bucket url", map[string]string{EnvBucketURL: " mem://x "}, func(c Config) bool { return c.BucketURL == "mem://x" }, false},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			c, err := ConfigFromEnv(envOf(r.env))
			if err != nil {
				t.Fatal(err)
			}
			if !r.check(c) {
				t.Fatalf("config %+v", c)
			}
			if got := len(c.Warnings) > 0; got != r.warns {
				t.Fatalf("warnings %q, want some: %v", c.Warnings, r.warns)
			}
		})
	}
}

// TestConfigShardPairIsFailFast: a partial or invalid pair stops start-up;
// it never falls back to shard 0.
func TestConfigShardPairIsFailFast(t *testing.T) {
	for _, env := range []map[string]string{
		{EnvShardIndex: "1"},
		{EnvShardCount: "4"},
		{EnvShardIndex: "4", EnvShardCount: "4"},
		{EnvShardIndex: "0", EnvShardCount: "0"},
		{EnvShardIndex: "x", EnvShardCount: "2"},
		{EnvShardIndex: "-1", EnvShardCount: "2"},
	} {
		if _, err := ConfigFromEnv(envOf(env)); !errors.Is(err, bucketlog.ErrUsage) {
			t.Errorf("%v: %v, want a usage error", env, err)
		}
	}
}

// TestConfigNeverStartsDeleting: no combination of unknown values turns GC
// on or lowers the floor.
func TestConfigNeverStartsDeleting(t *testing.T) {
	c, err := ConfigFromEnv(envOf(map[string]string{
		EnvGC: "ON!", EnvGCMinRetained: "0", EnvGCMaxRetained: "-3", EnvGCInterval: "1e3",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.GC.Enabled || c.GC.MinRetainedSegments != 2 || c.GC.MaxRetainedSegments != 0 || c.GC.Interval != 0 {
		t.Fatalf("unknown values changed GC: %+v", c.GC)
	}
}

func TestConfigApply(t *testing.T) {
	c, err := ConfigFromEnv(envOf(map[string]string{EnvTailReplication: "off", EnvTailCleanup: "off", EnvBucketURL: "mem://"}))
	if err != nil {
		t.Fatal(err)
	}
	var o bucketlog.Options
	c.Apply(&o)
	if !o.DisableTailReplication || !o.DisableTailCleanup || o.BucketURL != "mem://" || o.ShardCount != 1 {
		t.Fatalf("apply: %+v", o)
	}
}
