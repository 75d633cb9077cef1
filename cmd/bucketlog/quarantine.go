package main

import (
	"fmt"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/localseg"
)

func init() {
	register(command{name: "quarantine", group: groupLog, run: runQuarantine,
		summary: "quarantine list|reappend|drop: the shard directories a fenced owner left moved aside (shard-NNNN.fenced-<epoch>)"})
}

const quarantineAbout = `A writer whose ownership epoch was superseded (writer fencing) keeps the
events it acknowledged locally after the new owner's cut in its directory;
its next start moves that directory aside as shard-NNNN.fenced-<epoch>.

  quarantine list  every moved-aside directory of the shard: its epoch, its
                   events (first..last sequence), its bytes (read-only)
  quarantine reappend  re-append, through the current owner (--to), the
                   events of the one named by --epoch beyond the cut that
                   ended its epoch, deduplicated by transaction id
                   (--dry-run lists them; see quarantine reappend --help)
  quarantine drop  remove the one named by --epoch (nothing else)`

type quarantined struct {
	Epoch    uint64 `json:"epoch"`
	Dir      string `json:"dir"`
	FirstSeq uint64 `json:"first_sequence"`
	LastSeq  uint64 `json:"last_sequence"`
	Segments int    `json:"segments"`
	Bytes    int64  `json:"bytes"`
	Error    string `json:"error,omitempty"`
}

func runQuarantine(c *cli, args []string) int {
	sub := ""
	if len(args) > 0 && args[0] == "reappend" {
		return runQuarantineReappend(c, args[1:])
	}
	if len(args) > 0 && (args[0] == "list" || args[0] == "drop") {
		sub, args = args[0], args[1:]
	}
	s := newOneShard("quarantine", "list|reappend|drop [--dir PATH] [--shard N] [--epoch E]", quarantineAbout)
	epoch := s.f.Uint64("epoch", 0, "drop: the epoch of the moved-aside directory to remove")
	if stop, code := c.parse(s.f, args); stop {
		return code
	}
	if sub == "" {
		return c.fail(usagef("quarantine needs list, reappend or drop"))
	}
	_, opts, n, err := s.resolve(c)
	if err == nil {
		err = existingRoot(opts.Dir)
	}
	if err != nil {
		return c.fail(err)
	}
	dir := bucketlog.ShardDir(opts.Dir, n)
	if sub == "drop" {
		if *epoch == 0 {
			return c.fail(usagef("quarantine drop needs --epoch"))
		}
		if err := localseg.RemoveFenced(localseg.OSFS{}, dir, *epoch); err != nil {
			return c.fail(fmt.Errorf("%w: %v", bucketlog.ErrInvalidState, err))
		}
		return c.emit(map[string]any{"action": "quarantine_drop", "shard": n, "epoch": *epoch, "dir": localseg.FencedDir(dir, *epoch)})
	}
	epochs, err := localseg.FencedEpochs(dir)
	if err != nil {
		return c.fail(err)
	}
	out := []quarantined{}
	for _, e := range epochs {
		q := quarantined{Epoch: e, Dir: localseg.FencedDir(dir, e)}
		st, err := localseg.Open(q.Dir, localseg.Options{ReadOnly: true})
		if err != nil {
			q.Error = err.Error()
		} else {
			snap, serr := st.Snapshot()
			if serr == nil {
				q.LastSeq, q.Segments = snap.Tip, len(snap.Segments)
				if snap.Tip > snap.ReclaimedSeq {
					q.FirstSeq = snap.ReclaimedSeq + 1
				}
				for _, sg := range snap.Segments {
					q.Bytes += sg.Size
				}
			}
			st.Close()
		}
		out = append(out, q)
	}
	return c.emit(map[string]any{"action": "quarantine_list", "shard": n, "quarantined": out})
}
