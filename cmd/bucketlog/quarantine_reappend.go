package main

import (
	"fmt"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/bucketview"
	"github.com/bucketlog/bucketlog/client"
	"github.com/bucketlog/bucketlog/localseg"
)

const quarantineReappendAbout = `Re-appends, through the shard's current owner, the events a moved-aside
directory (shard-NNNN.fenced-<epoch>) holds beyond the bucket's lineage:
those its writer acknowledged locally after the cut that ended its epoch
(the start record whose prev_epoch is --epoch). The events below the cut
are in the log already and are never re-appended.

Each event keeps its execution id, transaction id and payload, and gets a
new sequence from the owner. The owner deduplicates by transaction id
(retry-safe appends): a re-run, or an event a client already retried to
the owner, answers the sequence it holds (counted in "duplicates"), never
a second copy; an event whose transaction id the owner holds with other
content stops the run (class conflict) with what was done so far. The
owner's window of remembered transaction ids bounds this: events it
forgot (older than its window) would be appended again.

--dry-run lists what would be re-appended and contacts no owner (--to is
then optional). The directory is read only, never changed: drop it once
the run succeeded (quarantine drop).

Output (stdout):
  action       "quarantine_reappend"
  shard, epoch, dir
  cut          the sequence the cut ended --epoch at (0 when the epoch is
               off the bucket's chain: its claimant never had a cut that
               counted and acknowledged nothing beyond the chain)
  dry_run
  candidates   how many events lie beyond the cut
  events       [{"sequence","execution_id","transaction_id","byte_len",
               "global_sequence","duplicate"}]: sequence is in the moved-
               aside directory, global_sequence the owner's (absent in a
               dry run)
  appended, duplicates`

type reappendEvent struct {
	Sequence       uint64 `json:"sequence"`
	ExecutionID    string `json:"execution_id"`
	TransactionID  string `json:"transaction_id"`
	ByteLen        int    `json:"byte_len"`
	GlobalSequence uint64 `json:"global_sequence,omitempty"`
	Duplicate      bool   `json:"duplicate,omitempty"`
	payload        string
}

type reappendOutput struct {
	Action     string          `json:"action"`
	Shard      int             `json:"shard"`
	Epoch      uint64          `json:"epoch"`
	Dir        string          `json:"dir"`
	Cut        uint64          `json:"cut"`
	DryRun     bool            `json:"dry_run"`
	Candidates int             `json:"candidates"`
	Events     []reappendEvent `json:"events"`
	Appended   int             `json:"appended"`
	Duplicates int             `json:"duplicates"`
}

func runQuarantineReappend(c *cli, args []string) int {
	s := newOneShard("quarantine reappend", "--dir PATH --shard N --epoch E --bucket URL (--to http://OWNER | --dry-run)", quarantineReappendAbout)
	epoch := s.f.Uint64("epoch", 0, "the epoch of the moved-aside directory (shard-NNNN.fenced-<epoch>)")
	bucket := addBucketFlag(s.f, "the bucket whose lineage says where the epoch was cut (required)")
	to := s.f.String("to", "", "the base URL of the shard's current owner, a `bucketlog serve` (http://HOST:PORT)")
	dry := s.f.Bool("dry-run", false, "list what would be re-appended; contact no owner")
	if stop, code := c.parse(s.f, args); stop {
		return code
	}
	env, opts, n, err := s.resolve(c)
	if err == nil {
		err = existingRoot(opts.Dir)
	}
	if err == nil && *epoch == 0 {
		err = usagef("quarantine reappend needs --epoch")
	}
	if err == nil && *to == "" && !*dry {
		err = usagef("quarantine reappend needs --to (the current owner) or --dry-run")
	}
	var url string
	if err == nil {
		url, err = bucket.required(s.f, env)
	}
	var cl *client.Client
	if err == nil && !*dry {
		if cl, err = client.New(*to, client.Options{}); err != nil {
			err = usagef("--to: %v", err)
		}
	}
	if err != nil {
		return c.fail(err)
	}
	out := reappendOutput{Action: "quarantine_reappend", Shard: n, Epoch: *epoch, DryRun: *dry,
		Dir: localseg.FencedDir(bucketlog.ShardDir(opts.Dir, n), *epoch), Events: []reappendEvent{}}
	cut, onChain, err := epochCut(c, url, uint32(n), *epoch)
	if err != nil {
		return c.fail(err)
	}
	out.Cut = cut
	if onChain {
		if out.Events, err = eventsAfter(out.Dir, cut); err != nil {
			return c.fail(err)
		}
	}
	out.Candidates = len(out.Events)
	if *dry {
		return c.emit(out)
	}
	for i := range out.Events {
		ev := &out.Events[i]
		res, err := cl.Append(c.ctx, client.Event{ExecutionID: ev.ExecutionID, TransactionID: ev.TransactionID, Payload: ev.payload})
		if err != nil {
			out.Events = out.Events[:i]
			return c.failWith(out, fmt.Errorf("re-append of sequence %d (transaction %s): %w", ev.Sequence, ev.TransactionID, err))
		}
		ev.GlobalSequence, ev.Duplicate = res.Sequence, res.Duplicate
		if res.Duplicate {
			out.Duplicates++
		} else {
			out.Appended++
		}
	}
	return c.emit(out)
}

// epochCut reads the bucket's lineage: the sequence the cut that ended
// epoch ends it at, and whether the epoch is on the chain at all. An epoch
// the chain does not end (the newest: this directory's writer would still
// own the shard) is refused: nothing of it lies beyond a cut.
func epochCut(c *cli, url string, shard uint32, epoch uint64) (uint64, bool, error) {
	bk, err := blobtier.Open(c.ctx, url, blobtier.Options{})
	if err != nil {
		return 0, false, fmt.Errorf("%w: %v", bucketlog.ErrUsage, err)
	}
	defer bk.Close()
	v, err := bucketview.Read(c.ctx, bk, shard, bucketview.Options{Parts: bucketview.StartRecords})
	if err != nil {
		return 0, false, err
	}
	lin, err := v.Lineage()
	if err != nil {
		return 0, false, err
	}
	if !lin.OnChain(epoch) {
		return 0, false, nil
	}
	end, ended := lin.End(epoch)
	if !ended {
		return 0, false, fmt.Errorf("%w: epoch %d is the newest on the bucket's chain (no cut ended it): its directory is not a stale owner's", bucketlog.ErrInvalidState, epoch)
	}
	return end, true, nil
}

// eventsAfter reads the moved-aside directory (read-only) from the event
// after cut to its tip. An event without a transaction id refuses the run
// before anything is appended: its re-append would not be retry-safe.
func eventsAfter(dir string, cut uint64) ([]reappendEvent, error) {
	st, err := localseg.Open(dir, localseg.Options{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", bucketlog.ErrInvalidState, dir, err)
	}
	defer st.Close()
	out := []reappendEvent{}
	for after := cut; after < st.Tip(); {
		p, err := st.Scan(after, 1000)
		if err != nil {
			return nil, err
		}
		if p.Clamped {
			return nil, fmt.Errorf("%w: %s reclaimed events after the cut at %d (its base is %d): they cannot be re-appended", bucketlog.ErrInvalidState, dir, cut, p.Base)
		}
		if len(p.Records) == 0 {
			return nil, fmt.Errorf("%w: %s: no event after sequence %d below its tip %d", bucketlog.ErrInvalidState, dir, after, st.Tip())
		}
		for _, r := range p.Records {
			if r.TransactionID == "" {
				return nil, fmt.Errorf("%w: sequence %d in %s has no transaction id: its re-append would not be retry-safe", bucketlog.ErrInvalidState, r.Seq, dir)
			}
			out = append(out, reappendEvent{Sequence: r.Seq, ExecutionID: r.ExecutionID, TransactionID: r.TransactionID, ByteLen: len(r.Payload), payload: r.Payload})
			after = r.Seq
		}
	}
	return out, nil
}
