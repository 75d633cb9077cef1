package main

import (
	"fmt"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/bucketview"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/fencing"
)

func init() {
	register(command{name: "fencing", group: groupBucket, run: runFencing,
		summary: "show a shard's writer fencing in the bucket: claims, cuts, the chain, off-chain records, the current owner"})
}

const fencingAbout = `
Reads shard --shard's writer-fencing objects from the bucket, read-only (it
never claims): every claim (noetl.ehdb.ep.<shard>.<epoch>) and start record
(the cut, noetl.ehdb.eps.<shard>.<epoch>), the chain a reader follows (from
the newest start record back along prev_epoch to epoch 0), the start records
off that chain (their claimant was superseded before its cut counted), and
the current owner: the claimant of the highest claim. A claim above the
newest cut is a takeover under way, or one whose claimant died before its
cut (claimed_not_cut). restore and verify report the same chain as
"lineage" and the objects it skipped as "zombie_objects" (a stale writer's
objects: of an epoch off the chain, beyond the cut that ended their epoch,
or at segment ids the cut fenced off). A bucket with no claim is a bucket
written before fencing: epoch 0, every object valid.

Exit 0 with the report; a damaged start record or a broken chain (a record
missing from its middle: every reader refuses such a bucket) prints the
report with "lineage_error" and exits 5.

Output:
  action            "fencing"
  shard             the shard
  claims            [{"epoch","key","owner","nonce","error"}] in epoch order
  highest_claim     the highest claimed epoch (0: none)
  current_owner     the owner named by the highest claim ("" when none or unreadable)
  cuts              [{"key","on_chain","error", the start record's fields:
                    "epoch","prev_epoch","prev_end_seq","start_seq","fence_segment",
                    "start_segment","watermark_seq"}] in epoch order
  chain             {"epochs","cuts","off_chain"}: the lineage readers follow
  newest_epoch      the newest epoch on the chain (0: none)
  claimed_not_cut   claimed epochs above the newest cut
  lineage_error     why no chain could be built ("" when it could)`

type fencingClaim struct {
	Epoch uint64 `json:"epoch"`
	Key   string `json:"key"`
	Owner string `json:"owner"`
	Nonce string `json:"nonce"`
	Error string `json:"error,omitempty"`
}

type fencingCut struct {
	Key     string `json:"key"`
	OnChain bool   `json:"on_chain"`
	Error   string `json:"error,omitempty"`
	fencing.StartRecord
}

type fencingOutput struct {
	Action        string                 `json:"action"`
	Shard         int                    `json:"shard"`
	Claims        []fencingClaim         `json:"claims"`
	HighestClaim  uint64                 `json:"highest_claim"`
	CurrentOwner  string                 `json:"current_owner"`
	Cuts          []fencingCut           `json:"cuts"`
	Chain         coldload.LineageReport `json:"chain"`
	NewestEpoch   uint64                 `json:"newest_epoch"`
	ClaimedNotCut []uint64               `json:"claimed_not_cut"`
	LineageError  string                 `json:"lineage_error"`
}

func runFencing(c *cli, args []string) int {
	f := newFlags("fencing", "--bucket URL [--shard N]", fencingAbout)
	bucket := addBucketFlag(f, "the bucket to read (required)")
	shardF := addShardFlag(f)
	if stop, code := c.parse(f, args); stop {
		return code
	}
	env := c.env()
	url, err := bucket.required(f, env)
	if err != nil {
		return c.fail(err)
	}
	shard, err := shardF.shard(f, env)
	if err != nil {
		return c.fail(err)
	}
	bk, err := blobtier.Open(c.ctx, url, blobtier.Options{})
	if err != nil {
		return c.fail(fmt.Errorf("%w: %v", bucketlog.ErrUsage, err))
	}
	defer bk.Close()
	v, err := bucketview.Read(c.ctx, bk, uint32(shard), bucketview.Options{Parts: bucketview.Fencing, ReadClaims: true})
	if err != nil {
		return c.fail(err)
	}
	out := fencingReport(&v)
	if _, err := v.Lineage(); err != nil {
		return c.failWith(out, fmt.Errorf("%w: %w", coldload.ErrLineage, err))
	}
	return c.emit(out)
}

// fencingReport describes a view that read the fencing parts.
func fencingReport(v *bucketview.View) fencingOutput {
	out := fencingOutput{Action: "fencing", Shard: int(v.Shard), HighestClaim: v.HighestClaim,
		Claims: []fencingClaim{}, Cuts: []fencingCut{}, ClaimedNotCut: []uint64{}}
	for _, co := range v.ClaimObjects {
		fc := fencingClaim{Epoch: co.Info.Parsed.Epoch, Key: co.Info.Key, Owner: co.Claim.Owner, Nonce: co.Claim.Nonce}
		if co.Err != nil {
			fc.Error = co.Err.Error()
		}
		out.Claims = append(out.Claims, fc)
	}
	if owner, ok := v.Owner(); ok {
		out.CurrentOwner = owner.Owner
	}
	lin, err := v.Lineage()
	if err != nil {
		out.LineageError = err.Error()
	} else {
		out.Chain, out.NewestEpoch = coldload.ReportLineage(lin), lin.Newest()
	}
	for _, so := range v.Starts {
		fc := fencingCut{Key: so.Info.Key, StartRecord: so.Record}
		fc.Epoch = so.Info.Parsed.Epoch
		if so.Err != nil {
			fc.Error = so.Err.Error()
		} else if err == nil {
			fc.OnChain = lin.OnChain(fc.Epoch)
		}
		out.Cuts = append(out.Cuts, fc)
	}
	for _, co := range v.ClaimObjects {
		if e := co.Info.Parsed.Epoch; err == nil && e > out.NewestEpoch && !hasCut(v, e) {
			out.ClaimedNotCut = append(out.ClaimedNotCut, e)
		}
	}
	if out.Chain.Epochs == nil {
		out.Chain = coldload.LineageReport{Epochs: []uint64{}, Cuts: []fencing.StartRecord{}, OffChain: []uint64{}}
	}
	return out
}

func hasCut(v *bucketview.View, epoch uint64) bool {
	for _, so := range v.Starts {
		if so.Info.Parsed.Epoch == epoch {
			return true
		}
	}
	return false
}
