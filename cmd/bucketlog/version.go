package main

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

func init() {
	register(command{name: "version", group: groupServer, run: runVersion,
		summary: "print the module version, VCS commit and Go version (also bucketlog --version)"})
}

// versionOutput is what `bucketlog version` and `bucketlog --version`
// print, from the binary's build information.
type versionOutput struct {
	Action    string `json:"action"`
	Version   string `json:"version"`    // the main module's version ("(devel)" for a local build)
	Commit    string `json:"commit"`     // vcs.revision, "unknown" when built without VCS stamping
	Modified  bool   `json:"modified"`   // vcs.modified: built from a tree with local changes
	GoVersion string `json:"go_version"` // the toolchain that built the binary
}

func buildVersion() versionOutput {
	out := versionOutput{Action: "version", Version: "unknown", Commit: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return out
	}
	if bi.Main.Version != "" {
		out.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		out.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if s.Value != "" {
				out.Commit = s.Value
			}
		case "vcs.modified":
			out.Modified = s.Value == "true"
		}
	}
	return out
}

const versionAbout = `
Prints the binary's build information as one JSON object:
  {"action":"version","version","commit","modified","go_version"}
version is the main module's version ("(devel)" for a build from a work
tree), commit the VCS revision ("unknown" when built with -buildvcs=false),
go_version the toolchain's. serve exports the same as the gauge
bucketlog_build_info{version,commit,go_version} = 1.`

func runVersion(c *cli, args []string) int {
	f := newFlags("version", "", versionAbout)
	if stop, code := c.parse(f, args); stop {
		return code
	}
	return c.emit(buildVersion())
}

// buildInfoGauge is bucketlog_build_info: 1, labelled with the build.
func buildInfoGauge() prometheus.Collector {
	v := buildVersion()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "bucketlog_build_info",
		Help:        "Build information of the running binary; the value is always 1.",
		ConstLabels: prometheus.Labels{"version": v.Version, "commit": v.Commit, "go_version": v.GoVersion},
	})
	g.Set(1)
	return g
}
