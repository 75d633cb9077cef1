package emulator_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/blobtier/faultbucket"
	"github.com/bucketlog/bucketlog/coldload"
	"github.com/bucketlog/bucketlog/tailbatch"
	"github.com/bucketlog/bucketlog/watermark"
)

// TestFaultCampaign is the bucket-fault campaign (reliability issue, part
// 2): every fault kind of faultbucket in every scenario that meets it,
// through the public API, with the engine driven by hand (NoBackground) so
// every pass is deterministic.
//
// Each cell opens the engine over a fault-injecting bucket (memblob for the
// bulk; gofakes3 where compare-and-swap is needed), brings the scenario to
// its starting state, installs the fault, appends (every append must
// succeed) and drives Ship/GC/Restore, then removes the fault, drives again,
// restarts the engine, and checks:
//
//   - 0 loss: a restore from the bucket alone (a fault-free view of the same
//     objects) holds every acknowledged event up to the shipped position
//     under the fault, and every acknowledged event after recovery, byte for
//     byte, gapless, each once; the local store likewise;
//   - detection: a write that lands altered is reported as a refusal naming
//     the key by any restore that meets it, never read as other events;
//   - metrics: the signal series that must move for the fault did
//     (bucket_requests_total by result, tail_replication_failed_total,
//     tail_reclaim_failed_total, gc_ops_total{outcome="error"}); a cell
//     marked silent moves none, and its verdict says why that is acceptable
//     or what an operator lacks;
//   - readiness: after every failed pass Health says not ready with a reason,
//     and after recovery it is ready.
//
// The table is logged (go test -v) and written as JSON when
// BUCKETLOG_FAULTS_JSON names a file. -short keeps one cell per fault kind
// and scenario (it drops the second backend of the cursor scenario and the
// deadline cells but one).
func TestFaultCampaign(t *testing.T) {
	rep := &faultReport{}
	t.Cleanup(func() { rep.log(t, true) })
	for _, c := range fltCells() {
		if testing.Short() && c.long {
			continue
		}
		name := c.scenario + "/" + c.fault + "/" + c.backend
		t.Run(name, func(t *testing.T) {
			row := runFaultCell(t, c)
			rep.rows = append(rep.rows, row)
		})
	}
}

// faultCell is one fault in one scenario.
type faultCell struct {
	scenario, fault, backend string
	rules                    func(r *faultRig) []faultbucket.Rule
	// setup and during replace the scenario's.
	setup  func(r *faultRig)
	during func(r *faultRig)
	// want lists the signal series that must move under the fault.
	want []string
	// silent: the fault moves no signal series (asserted).
	silent bool
	// failsPass: some pass under the fault must fail.
	failsPass bool
	// lands: a write that lands altered while the bucket reports success.
	// The engine is not required to notice; every restore that meets the
	// object must refuse naming its key, and nothing may be read wrong.
	lands bool
	// exact: every injected fault failed exactly one bucket request of the
	// engine, so bucket_requests_total{result="error"} grew by the number
	// injected.
	exact bool
	// retryIdle: the engine was told its deletes failed, so a pass with
	// nothing new after recovery must retry them.
	retryIdle bool
	// readyOK: the failing pass is cleanup or GC, not shipping: the shard
	// stays ready (a bucket that refuses deletes must not keep a shipping
	// shard unready forever).
	readyOK bool
	// long: dropped by -short.
	long bool
	why  string
}

// Series names (fltMetrics keys).
func bucketSeries(op, result string) string {
	return fmt.Sprintf(`bucket_requests_total{operation=%q,result=%q}`, op, result)
}

const (
	mTailFailed    = "tail_replication_failed_total"
	mReclaimFailed = "tail_reclaim_failed_total"
	mGCError       = `gc_ops_total{outcome="error"}`
)

// Rule constructors.
func refuseOn(op faultbucket.Op, key string) faultbucket.Rule {
	return faultbucket.Rule{Op: op, Kind: faultbucket.Refuse, Key: key}
}

func delayOn(op faultbucket.Op, key string, d time.Duration) faultbucket.Rule {
	return faultbucket.Rule{Op: op, Kind: faultbucket.Delay, Key: key, Delay: d}
}

func lostAckOn(op faultbucket.Op, key string) faultbucket.Rule {
	return faultbucket.Rule{Op: op, Kind: faultbucket.LostAck, Key: key}
}

// mutateOn alters the next `times` matching objects (0: every one).
func mutateOn(op faultbucket.Op, kind faultbucket.Kind, key string, times int) faultbucket.Rule {
	return faultbucket.Rule{Op: op, Kind: kind, Key: key, Times: times}
}

func hideOn(key string, listings int) faultbucket.Rule {
	return faultbucket.Rule{Op: faultbucket.OpList, Kind: faultbucket.Hide, Key: key, Listings: listings}
}

func rules(rs ...faultbucket.Rule) func(*faultRig) []faultbucket.Rule {
	return func(*faultRig) []faultbucket.Rule { return rs }
}

// writeCells are the write faults every writing scenario meets, on the
// keys of that scenario.
func writeCells(scenario, backend, key string, putOp string, extra []string, landsWhy string) []faultCell {
	failed := append([]string{bucketSeries(putOp, "error")}, extra...)
	return []faultCell{
		{scenario: scenario, fault: "refuse", backend: backend, rules: rules(refuseOn(faultbucket.OpWrite, key)),
			want: failed, failsPass: true, exact: true,
			why: "refused writes fail the pass, the events stay local and ship after recovery"},
		{scenario: scenario, fault: "delay_timeout", backend: backend, rules: rules(delayOn(faultbucket.OpWrite, key, fltLongDelay)),
			want: failed, failsPass: true, exact: true, long: scenario != "uploader",
			why: "a write slower than the per-call deadline is cut and counted as an error"},
		{scenario: scenario, fault: "delay_within", backend: backend, rules: rules(delayOn(faultbucket.OpWrite, key, fltShortDelay)),
			silent: true,
			why:    "ACCEPTABLE: slow but successful writes are not errors; GAP: no bucket latency histogram shows a slowing bucket before it times out"},
		{scenario: scenario, fault: "lost_ack", backend: backend, rules: rules(lostAckOn(faultbucket.OpWrite, key)),
			want: failed, failsPass: true,
			why: "the write landed and was reported failed: counted as a put error; the retry finds the identical object (success), or a later, wider batch overlaps it with identical bytes"},
		{scenario: scenario, fault: "truncate_write", backend: backend, rules: rules(mutateOn(faultbucket.OpWrite, faultbucket.Truncate, key, 1)),
			lands: true,
			why:   landsWhy},
		{scenario: scenario, fault: "corrupt_write", backend: backend, rules: rules(mutateOn(faultbucket.OpWrite, faultbucket.Corrupt, key, 1)),
			lands: true,
			why:   landsWhy},
		{scenario: scenario, fault: "extend_write", backend: backend, rules: rules(mutateOn(faultbucket.OpWrite, faultbucket.Extend, key, 1)),
			lands: true, long: true,
			why: landsWhy},
	}
}

func fltCells() []faultCell {
	var cells []faultCell

	// Uploader: sealed segment puts.
	cells = append(cells, writeCells("uploader", "mem", fltSegKeys, "put", nil,
		"the put succeeds but the uploader reads the object back before counting it durable: the damaged object is deleted and uploaded again on the next pass, "+
			"so no tail object covering it is cleaned up early; a restore meeting it meanwhile refuses naming the key")...)
	cells = append(cells, faultCell{scenario: "uploader", fault: "hide_at_restart", backend: "mem",
		rules: rules(hideOn(fltSegKeys, 0)), during: restartDuring, silent: true,
		why: "ACCEPTABLE: a restart that does not see its segment objects uploads them again; the identical object counts as success"})

	// Tail shipping: tail puts.
	cells = append(cells, writeCells("tail", "mem", fltTailKeys, "put", []string{mTailFailed},
		"KNOWN LIMIT (detected at restore): tail objects are not read back (a GET per tick would double the requests); the shipped position moves past events no verifiable object holds (unrc under the fault); "+
			"every restore refuses naming the key until a durable segment supersedes the object and cleanup deletes it (here: the seal after recovery); on GCS the Content-MD5 of every write catches this at the put")...)
	cells = append(cells, faultCell{scenario: "tail", fault: "lost_ack_widening", backend: "mem",
		rules: rules(lostAckOn(faultbucket.OpWrite, fltTailKeys)), during: widenDuring,
		want: []string{bucketSeries("put", "error"), mTailFailed}, failsPass: true,
		why: "every lost answer is followed by more appends, so each retry is a wider batch under a new key overlapping the landed ones; restore de-duplicates (identical bytes), no duplicate, no gap"})
	cells = append(cells, faultCell{scenario: "tail", fault: "hide_at_restart", backend: "mem",
		rules: rules(hideOn(fltTailKeys, 0)), during: restartDuring, silent: true,
		why: "ACCEPTABLE: a restart that does not see its tail objects rebuilds a lower cursor and re-ships; overlapping objects hold identical bytes and a restore de-duplicates them"})

	// Cursor object: a plain put on memblob, compare-and-swap on S3.
	cur := blobtier.CursorKey(0)
	for _, bk := range []string{"mem", "s3"} {
		op := map[string]string{"mem": "put", "s3": "cas"}[bk]
		for _, c := range writeCells("cursor", bk, cur, op, nil,
			"the write lands damaged; the owner's next cursor write finds it damaged and replaces it (logged); a restore meeting it meanwhile refuses naming the key") {
			if c.fault == "extend_write" || (bk == "s3" && c.fault == "delay_within") {
				continue
			}
			c.long = c.long || bk == "s3" && c.fault != "refuse" && c.fault != "corrupt_write"
			cells = append(cells, c)
		}
		cells = append(cells,
			faultCell{scenario: "cursor", fault: "corrupt_read", backend: bk, exact: true, rules: rules(mutateOn(faultbucket.OpRead, faultbucket.Corrupt, cur, 1)),
				want: []string{bucketSeries("get", "error")}, long: bk == "s3",
				why: "the cursor read before a write fails verification: the owner treats the object as damaged and rewrites it (logged); the failed read is counted"},
			faultCell{scenario: "cursor", fault: "truncate_read", backend: bk, exact: true, rules: rules(mutateOn(faultbucket.OpRead, faultbucket.Truncate, cur, 0)),
				want: []string{bucketSeries("get", "error")}, long: true,
				why: "every cursor read is short: the owner rewrites the object each pass (logged); events still ship in tail objects"},
			faultCell{scenario: "cursor", fault: "refuse_read", backend: bk, exact: true, rules: rules(refuseOn(faultbucket.OpRead, cur)),
				want: []string{bucketSeries("get", "error")}, failsPass: true, long: bk == "s3",
				why: "the cursor cannot be read, so it is not written; events still ship in tail objects"},
		)
	}

	// Reclaim: watermark compare-and-swap, segment and tail deletes,
	// listings. gofakes3 only (shared GC needs compare-and-swap).
	wm := blobtier.WatermarkKey(0)
	cells = append(cells,
		faultCell{scenario: "reclaim", fault: "wm_refuse", backend: "s3", exact: true, readyOK: true, rules: rules(refuseOn(faultbucket.OpWrite, wm)),
			want: []string{bucketSeries("cas", "error"), mGCError}, failsPass: true,
			why: "the watermark commit fails, GC stops before touching the local store or the bucket"},
		faultCell{scenario: "reclaim", fault: "wm_delay_timeout", backend: "s3", exact: true, readyOK: true, rules: rules(delayOn(faultbucket.OpWrite, wm, fltLongDelay)),
			want: []string{bucketSeries("cas", "error"), mGCError}, failsPass: true, long: true,
			why: "the watermark commit is cut by the deadline, as a refusal"},
		faultCell{scenario: "reclaim", fault: "wm_lost_ack", backend: "s3", readyOK: true, rules: rules(lostAckOn(faultbucket.OpWrite, wm)),
			want: []string{bucketSeries("cas", "error"), mGCError}, failsPass: true,
			why: "the watermark moved but GC was told it failed: the next pass adopts it (no duplicate, no gap)"},
		faultCell{scenario: "reclaim", fault: "wm_corrupt_write", backend: "s3", rules: rules(mutateOn(faultbucket.OpWrite, faultbucket.Corrupt, wm, 1)),
			lands: true,
			why:   "the compare-and-swap lands a damaged mark; the owner's next GC pass (or its next start) finds it damaged and rewrites it with its local reclaim base, which is at or above every object it deleted (logged); a restore meeting it meanwhile refuses naming the key"},
		faultCell{scenario: "reclaim", fault: "wm_corrupt_read", backend: "s3", exact: true, rules: rules(mutateOn(faultbucket.OpRead, faultbucket.Corrupt, wm, 1)),
			want: []string{bucketSeries("get", "error")},
			why:  "watermark.Read re-reads a corrupt answer; the pass succeeds, the failed read is counted"},
		faultCell{scenario: "reclaim", fault: "wm_extend_read", backend: "s3", exact: true, readyOK: true, rules: rules(mutateOn(faultbucket.OpRead, faultbucket.Extend, wm, 0)),
			want: []string{bucketSeries("get", "error"), mGCError}, failsPass: true, long: true,
			why: "every watermark read is long: GC fails until the bucket recovers"},
		faultCell{scenario: "reclaim", fault: "seg_delete_refuse", backend: "s3", exact: true, rules: rules(refuseOn(faultbucket.OpDelete, fltSegKeys)),
			want: []string{bucketSeries("delete", "error")},
			why:  "failed segment deletes leave orphans below the watermark (readers skip them); the next explicit pass deletes them; GAP: only bucket_requests_total{delete,error} shows it (gc_ops_total says reclaimed)"},
		faultCell{scenario: "reclaim", fault: "seg_delete_lost_ack", backend: "s3", rules: rules(lostAckOn(faultbucket.OpDelete, fltSegKeys)),
			want: []string{bucketSeries("delete", "error")},
			why:  "the delete happened and was reported failed: counted as a delete error; nothing is left to retry"},
		faultCell{scenario: "reclaim", fault: "tail_delete_refuse", backend: "s3", exact: true, retryIdle: true, readyOK: true, rules: rules(refuseOn(faultbucket.OpDelete, fltTailKeys)),
			want: []string{bucketSeries("delete", "error"), mReclaimFailed}, failsPass: true,
			why: "tail cleanup counts the failures and retries on the next pass"},
		faultCell{scenario: "reclaim", fault: "tail_delete_lost_ack", backend: "s3", retryIdle: true, readyOK: true, rules: rules(lostAckOn(faultbucket.OpDelete, fltTailKeys)),
			want: []string{bucketSeries("delete", "error"), mReclaimFailed}, failsPass: true, long: true,
			why: "the delete happened and was reported failed: counted; the retry finds nothing to delete"},
		faultCell{scenario: "reclaim", fault: "list_refuse", backend: "s3", exact: true, readyOK: true, rules: rules(refuseOn(faultbucket.OpList, fltAnyKey)),
			want: []string{bucketSeries("list", "error"), mGCError}, failsPass: true,
			why: "GC and cleanup cannot list: the watermark may be committed and the local store reclaimed, the deletes wait for the next pass"},
		faultCell{scenario: "reclaim", fault: "list_hide", backend: "s3", rules: rules(hideOn(fltAnyKey, 0)),
			silent: true,
			why:    "ACCEPTABLE: objects missing from a listing are left for a later pass (orphans readers skip); nothing is lost; the leftover count is not a metric (tail_objects_retained counts only what was listed)"},
	)

	// Cold load: restore reads and listings (Restore, and Open on an empty
	// disk, both through the faults).
	seg2 := blobtier.SegmentKey(0, 2)
	readCell := func(fault string, r faultbucket.Rule, want []string, why string) faultCell {
		return faultCell{scenario: "coldload", fault: fault, backend: "mem", rules: rules(r), want: want, why: why}
	}
	getErr := []string{bucketSeries("get", "error")}
	cells = append(cells,
		readCell("refuse_read", refuseOn(faultbucket.OpRead, seg2), getErr, "the restore fails naming the key; nothing is written to the target"),
		readCell("delay_timeout_read", delayOn(faultbucket.OpRead, seg2, fltLongDelay), getErr, "the read is cut by the deadline: the restore fails naming the key"),
		readCell("delay_within_read", delayOn(faultbucket.OpRead, seg2, fltShortDelay), nil, "ACCEPTABLE: a slow read that succeeds; GAP: no bucket latency histogram"),
		readCell("truncate_read", mutateOn(faultbucket.OpRead, faultbucket.Truncate, seg2, 0), getErr, "blobtier's length check refuses the short object, naming the key"),
		readCell("corrupt_read", mutateOn(faultbucket.OpRead, faultbucket.Corrupt, seg2, 0), getErr, "blobtier's digest check refuses the altered object, naming the key"),
		readCell("extend_read", mutateOn(faultbucket.OpRead, faultbucket.Extend, seg2, 0), getErr, "blobtier reads one byte past the promised length and refuses the long object, naming the key"),
		readCell("tail_corrupt_read", mutateOn(faultbucket.OpRead, faultbucket.Corrupt, fltTailKeys, 0), getErr, "a corrupt tail object read fails the restore naming the key"),
		readCell("cursor_corrupt_read", mutateOn(faultbucket.OpRead, faultbucket.Corrupt, blobtier.CursorKey(0), 0), getErr, "a corrupt cursor object read fails the restore naming the key"),
		readCell("list_refuse", refuseOn(faultbucket.OpList, fltAnyKey), []string{bucketSeries("list", "error")}, "the restore fails naming the listing prefix"),
		readCell("hide_once", hideOn(seg2, 1), nil, "ACCEPTABLE: one listing without segment 2 is a gap; the restore sees the bucket changed, plans again and completes"),
		readCell("hide_segment", hideOn(seg2, 0), nil, "ACCEPTABLE: a segment missing from every listing is a gap: the restore refuses naming the missing range (visible as the restore's error, not a metric)"),
		readCell("hide_tails", hideOn(fltTailKeys, 0), nil, "ACCEPTABLE: tail objects missing from every listing leave the restore short of the cursor object's shipped_through: it refuses (ErrShort)"),
	)
	for i := range cells {
		if cells[i].scenario == "coldload" {
			cells[i].silent = len(cells[i].want) == 0
		}
	}
	return cells
}

// TestLaggingListingLimitation demonstrates the one assumption about the
// bucket that no check of ours can replace: listings are strongly
// consistent (S3 since 2020, GCS, gofakes3 and fake-gcs-server are).
//
// The writer's last tick put its tail object (sequences 59..63) and then
// failed to write the cursor object, which still says shipped_through 58
// (docs/FORMAT.md §6.6: a lost cursor update means redelivery, never loss). A restore,
// and an Open on an empty disk, whose listing lags and does not show that
// newest tail object find a complete-looking history through 58: nothing
// (no gap, no shortfall below shipped_through) tells them that five
// acknowledged, shipped events exist, and a new owner then reuses sequence
// 59 (which a later restore detects as two histories). RELIABILITY.md
// states the assumption. It runs only when BUCKETLOG_LAGGING_LISTING=1, to
// show the failure on demand; it fails then.
func TestLaggingListingLimitation(t *testing.T) {
	if os.Getenv("BUCKETLOG_LAGGING_LISTING") != "1" {
		t.Skip("demonstrates the strongly-consistent-listing assumption; set BUCKETLOG_LAGGING_LISTING=1 to see it fail")
	}
	c := faultCell{scenario: "coldload", fault: "hide_newest_tail_lagging_cursor", backend: "mem",
		setup: laggingCursorSetup,
		rules: func(r *faultRig) []faultbucket.Rule {
			tails := objects(r.t, r.clean, 0, blobtier.KindTail)
			newest := tails[0]
			for _, tl := range tails {
				if tl.Parsed.LastSeq > newest.Parsed.LastSeq {
					newest = tl
				}
			}
			return []faultbucket.Rule{hideOn(newest.Key, 0)}
		},
		silent: true,
		why:    "a restore cannot know what a listing does not show when the cursor object lags: it must not then pass for complete"}
	t.Run("restore", func(t *testing.T) {
		row := runFaultCell(t, c)
		rep := &faultReport{rows: []faultRow{row}}
		rep.log(t, false)
	})

	// What follows from it: a new owner hydrated through that listing
	// continues from 58 and gives sequence 59 to a different event. The
	// bucket then holds two histories for 59, and the acknowledged event
	// is no longer the shard's.
	t.Run("new_owner", func(t *testing.T) {
		ctx := ctxT(t)
		r := newFaultRig(t, "mem")
		laggingCursorSetup(r)
		r.install(c.rules(r))
		l, err := bucketlog.Open(ctx, r.options(t.TempDir(), nil))
		if err != nil {
			t.Fatalf("open on an empty disk under the fault: %v", err)
		}
		defer l.Close()
		ev := event(r.execs, 1000)
		res, err := l.Append(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		_, serr := l.Ship(ctx, false)
		l.Close()
		r.uninstall()
		view := r.restoreFrom(r.clean)
		t.Logf("the new owner appended sequence %d (acknowledged before as %q, now %q); its ship: %v; a restore now: %v",
			res.Seq, r.acked[res.Seq-1].TransactionID, ev.TransactionID, serr, view.err)
		if res.Seq <= uint64(len(r.acked)) {
			t.Errorf("a new owner reused sequence %d of an acknowledged, shipped event", res.Seq)
		}
	})
}

// laggingCursorSetup is the cold-load setup whose last tick put its tail
// object and failed to write the cursor object (also at Close).
func laggingCursorSetup(r *faultRig) {
	fltScenarios["coldload"].setup(r)
	l, err := bucketlog.Open(ctxT(r.t), r.options(r.root, nil))
	if err != nil {
		r.t.Fatal(err)
	}
	r.l = l
	shipped := l.ShippedThrough()
	id := r.fb.MustAdd(refuseOn(faultbucket.OpWrite, blobtier.CursorKey(0)))
	r.add(5)
	if _, err := l.Ship(ctxT(r.t), false); err == nil {
		r.t.Fatal("ship succeeded with the cursor object refused")
	}
	l.Close() // its last shipment fails on the cursor object too
	r.fb.Remove(id)
	r.l = nil
	if cur, _, err := tailbatch.ReadCursor(ctxT(r.t), r.clean, 0); err != nil || cur.ShippedThrough != shipped {
		r.t.Fatalf("cursor object %+v %v, want shipped_through %d", cur, err, shipped)
	}
}

// faultScenario drives one scenario: its starting state, its passes under
// the fault, and its passes after the fault is removed.
type faultScenario struct {
	setup   func(r *faultRig)
	during  func(r *faultRig)
	recover func(r *faultRig) error
}

var fltScenarios = map[string]faultScenario{
	// Sealed segment puts: segments roll over by size while the fault is
	// on; the tail ships what is not sealed.
	"uploader": {
		setup: func(r *faultRig) {
			r.openEngine()
			r.add(45)
			fltMust(r, r.ship(false), "setup ship")
		},
		during: func(r *faultRig) {
			for range 2 {
				r.add(40)
				r.ship(false)
				r.ship(false)
			}
			r.ship(true)
		},
		recover: func(r *faultRig) error {
			r.add(5)
			return errors.Join(r.ship(false), r.ship(true))
		},
	},
	// Tail puts: the active segment never fills (16 KiB segments), so every
	// event ships in tail objects.
	"tail": {
		setup: func(r *faultRig) {
			r.segMax = 16384
			r.openEngine()
			r.add(5)
			fltMust(r, r.ship(false), "setup ship")
		},
		during: func(r *faultRig) {
			for range 3 {
				r.add(7)
				r.ship(false)
				r.ship(false) // a retry with nothing new: the same batch again
			}
		},
		recover: func(r *faultRig) error {
			r.add(4)
			err := r.ship(false)
			// Sealing makes the active segment durable: tail cleanup then
			// deletes every tail object it covers, a corrupt one included.
			return errors.Join(err, r.ship(true))
		},
	},
	// The cursor object: written after each tail put that moved the
	// shipped position, with a consumer that acks as it goes.
	"cursor": {
		setup: func(r *faultRig) {
			r.segMax = 16384
			r.openEngine()
			r.add(6)
			r.consume("c")
			fltMust(r, r.ship(false), "setup ship")
		},
		during: func(r *faultRig) {
			for range 3 {
				r.add(5)
				r.consume("c")
				r.ship(false)
			}
		},
		recover: func(r *faultRig) error {
			r.add(3)
			r.consume("c")
			return r.ship(false)
		},
	},
	// Shared reclaim: segments durable, a consumer acked to the tip, GC
	// commits the watermark, reclaims locally and deletes below it; tail
	// cleanup deletes superseded tail objects.
	"reclaim": {
		setup: func(r *faultRig) {
			r.openEngine()
			r.add(60)
			fltMust(r, r.ship(true), "setup ship")
			r.consume("c")
		},
		during: func(r *faultRig) {
			r.add(40)
			r.ship(false)
			r.ship(true)
			r.consume("c")
			r.gc()
			r.add(10)
			r.ship(false)
			r.gc()
		},
		recover: func(r *faultRig) error {
			if r.cell.retryIdle {
				// The engine knows its deletes failed: one pass with nothing
				// new must retry them.
				err := r.ship(false)
				r.checkNoSuperseded()
				if err != nil {
					return err
				}
			}
			r.consume("c")
			return errors.Join(r.ship(true), r.gc(), r.gc())
		},
	},
	// Cold load: a writer fills the bucket (segments, a tail object, the
	// cursor object) and is gone; under the fault the bucket is read back
	// by Restore and by Open on an empty disk.
	"coldload": {
		setup: func(r *faultRig) {
			l, err := bucketlog.Open(ctxT(r.t), r.options(r.root, nil))
			if err != nil {
				r.t.Fatal(err)
			}
			r.l = l
			r.add(50)
			fltMust(r, r.ship(true), "setup ship")
			r.add(8)
			r.consume("c")
			fltMust(r, r.ship(false), "setup ship")
			if err := l.Close(); err != nil {
				r.t.Fatal(err)
			}
			r.l = nil
			if n := len(objects(r.t, r.clean, 0, blobtier.KindSegment)); n < 2 {
				r.t.Fatalf("setup left %d segment objects, the cells read segment 2", n)
			}
		},
		during: func(r *faultRig) {
			// Each reader meets the same fault (a Hide rule's listing budget
			// starts again).
			reinstall := func() {
				r.uninstall()
				r.install(r.cell.rules(r))
			}
			reinstall()
			view := r.restoreFrom(r.b)
			r.coldOutcome("restore", view)
			reinstall()
			dir := r.t.TempDir()
			l, err := bucketlog.Open(ctxT(r.t), r.options(dir, r.reg))
			if err != nil {
				r.coldOutcome("open", restoreView{err: err})
				return
			}
			view = fltView(r.t, l)
			l.Close()
			r.coldOutcome("open", view)
		},
		recover: func(r *faultRig) error {
			view := r.restoreFrom(r.b)
			if view.err != nil {
				return fmt.Errorf("restore after recovery: %w", view.err)
			}
			if v := r.judge(view, uint64(len(r.acked))); !v.clean() {
				return fmt.Errorf("restore after recovery: %v", v)
			}
			l, err := bucketlog.Open(ctxT(r.t), r.options(r.t.TempDir(), r.reg))
			if err != nil {
				return fmt.Errorf("open on an empty disk after recovery: %w", err)
			}
			r.l = l
			r.t.Cleanup(func() { l.Close() })
			r.root = filepath.Dir(l.Dir())
			if v := r.judge(fltView(r.t, l), uint64(len(r.acked))); !v.clean() {
				return fmt.Errorf("hydrated store after recovery: %v", v)
			}
			return nil
		},
	},
}

// restartDuring restarts the engine under the fault (reconcile lists the
// bucket), then appends and ships.
func restartDuring(r *faultRig) {
	if err := r.reopen(); err != nil {
		r.t.Fatalf("restart under the fault: %v", err)
	}
	r.add(10)
	r.ship(false)
	r.ship(true)
}

// widenDuring appends between passes and never retries a batch as it
// was: each pass ships a wider batch than the one before.
func widenDuring(r *faultRig) {
	for range 3 {
		r.add(7)
		r.ship(false)
	}
}

func fltMust(r *faultRig, err error, what string) {
	r.t.Helper()
	if err != nil {
		r.t.Fatalf("%s: %v", what, err)
	}
}

// coldOutcome judges one read of the whole bucket under a read fault: a
// complete, exact store, or an error that names the object (or listing
// prefix) it is about. Never a shorter or different history.
func (r *faultRig) coldOutcome(what string, view restoreView) {
	r.passes++
	if view.err != nil {
		r.failed++
		if len(r.passErrs) < 2 {
			r.passErrs = append(r.passErrs, what+": "+view.err.Error())
		}
		// A refusal must say what it is about: the object or listing
		// prefix (blobtier's errors name it), or the typed hole or
		// shortfall that a missing object leaves.
		_, named := namesOneOf(view.err, []string{"noetl.ehdb."})
		if !named && !errors.Is(view.err, coldload.ErrGap) && !errors.Is(view.err, coldload.ErrShort) {
			r.t.Errorf("%s under the fault failed without naming an object or a range: %v", what, view.err)
		}
		return
	}
	v := r.judge(view, uint64(len(r.acked)))
	r.coldChecked += v.checked
	r.coldVerdict = append(r.coldVerdict, v)
	if !v.clean() {
		r.t.Errorf("%s under the fault returned a different history: %v", what, v)
	}
}

// runFaultCell runs one cell and returns its row.
func runFaultCell(t *testing.T, c faultCell) faultRow {
	start := time.Now()
	sc := fltScenarios[c.scenario]
	r := newFaultRig(t, c.backend)
	r.cell = c
	if c.setup != nil {
		c.setup(r)
	} else {
		sc.setup(r)
	}

	m0 := fltMetrics(t, r.reg)
	injected0 := r.fb.Total()
	r.install(c.rules(r))
	if c.during != nil {
		c.during(r)
	} else {
		sc.during(r)
	}
	injected := r.fb.Total() - injected0
	moved := fltMoved(m0, fltMetrics(t, r.reg))

	row := faultRow{Scenario: c.scenario, Fault: c.fault, Backend: c.backend, Injected: injected,
		Passes: r.passes, Failed: r.failed, NotReady: r.notReady, Metrics: moved, MaxBehind: r.maxBehind}
	var detected []string
	if r.failed > 0 {
		detected = append(detected, fmt.Sprintf("%d/%d passes failed", r.failed, r.passes))
	}
	for _, e := range r.passErrs {
		t.Logf("under the fault: %s", e)
	}

	// Under the fault: the local store holds everything; the bucket alone
	// holds everything up to the shipped position (or refuses, naming a
	// corrupt object, when one landed).
	if r.l != nil {
		v := r.judge(fltView(t, r.l), uint64(len(r.acked)))
		row.addVerdict(v)
		if !v.clean() {
			t.Errorf("local store under the fault: %v", v)
		}
	}
	row.Events += r.coldChecked
	for _, v := range r.coldVerdict {
		row.Lost, row.Dups, row.Wrong = row.Lost+v.lost, row.Dups+v.dups, row.Wrong+v.wrong+v.gaps
	}
	bound := uint64(len(r.acked))
	if r.l != nil {
		bound = r.l.ShippedThrough()
	}
	truth := r.truth()
	row.UnrecoverableDuring = truth.unrecoverable(bound)
	if row.UnrecoverableDuring > 0 && !c.lands {
		t.Errorf("under the fault, %d of the events shipped through %d are in no verifiable bucket object", row.UnrecoverableDuring, bound)
	}
	if view := r.restoreFrom(r.clean); view.err != nil {
		key, named := namesOneOf(view.err, truth.corrupt)
		switch {
		case c.lands && named && fltCorruptErr(view.err):
			detected = append(detected, "restore refuses "+fltKeyKind(key))
			t.Logf("restore under the fault: %v", view.err)
		default:
			t.Errorf("restore from the bucket alone under the fault: %v (corrupt objects at rest: %v)", view.err, truth.corrupt)
		}
	} else {
		v := r.judge(view, bound)
		row.addVerdict(v)
		if !v.clean() {
			t.Errorf("restore under the fault, shipped through %d: %v", bound, v)
		}
		if c.lands && len(truth.corrupt) > 0 {
			t.Errorf("restore under the fault succeeded over corrupt objects %v", truth.corrupt)
		}
	}
	if c.lands {
		ready := true
		if r.l != nil {
			ready, _ = r.l.Health()
		}
		if len(truth.corrupt) == 0 {
			detected = append(detected, "landed altered object no longer at rest")
		} else if r.failed == 0 && ready {
			detected = append(detected, "engine: no (ready, durable)")
		}
		t.Logf("corrupt at rest under the fault: %v; unrecoverable from the bucket: %d of %d shipped", truth.corrupt, row.UnrecoverableDuring, bound)
	}

	// Metrics.
	for _, w := range c.want {
		if moved[w] <= 0 {
			t.Errorf("%s did not move under %d injected faults (moved: %v)", w, injected, moved)
		}
	}
	if c.exact {
		var errs float64
		for k, v := range moved {
			if strings.HasPrefix(k, "bucket_requests_total{") && strings.HasSuffix(k, `result="error"}`) {
				errs += v
			}
		}
		if errs != float64(injected) {
			t.Errorf("%d faults injected, bucket_requests_total{result=\"error\"} grew by %g", injected, errs)
		}
	}
	if c.silent && len(moved) > 0 {
		t.Errorf("a silent cell moved %v: update the cell and the table", moved)
	}
	for k := range moved {
		if strings.HasPrefix(k, "eventlog_ops_total") {
			t.Errorf("an operation failed because of the bucket: %s", k)
		}
	}
	if injected == 0 {
		t.Errorf("the fault never fired")
	}
	// Readiness under the fault.
	if c.failsPass && r.failed == 0 {
		t.Errorf("no pass failed under the fault")
	}
	for _, bad := range r.readyBad {
		t.Errorf("readiness: %s", bad)
	}

	// Recovery.
	r.uninstall()
	recErr := sc.recover(r)
	if recErr != nil {
		if c.lands {
			t.Logf("recovery passes: %v", recErr)
		} else {
			t.Errorf("recovery passes: %v", recErr)
		}
	}
	if r.l != nil {
		ready, reason := r.l.Health()
		row.ReadyEnd = ready
		if !ready && !c.lands {
			t.Errorf("not ready after recovery: %s", reason)
		}
		if !ready {
			t.Logf("not ready after recovery: %s", reason)
		}
		r.checkNoSuperseded()
		if lv, ok := fltView(t, r.l).consumers["c"]; ok {
			r.wantConsumer, r.hasConsumer = lv, true
		}
	}
	truthEnd := r.truth()
	row.Restart = "ok"
	if r.l != nil {
		if err := r.reopen(); err != nil {
			row.Restart = "refused: " + fltErrWhat(err, truthEnd.corrupt)
			if _, named := namesOneOf(err, truthEnd.corrupt); !c.lands || !(named || errors.Is(err, bucketlog.ErrDiverged)) {
				t.Errorf("restart after recovery: %v", err)
			} else {
				t.Logf("restart after recovery: %v", err)
			}
		} else if _, err := r.l.Ship(ctxT(t), false); err != nil {
			row.Restart = "ship fails: " + fltErrWhat(err, truthEnd.corrupt)
			if c.lands {
				t.Logf("ship after the restart: %v", err)
			} else {
				t.Errorf("ship after the restart: %v", err)
			}
		}
	}
	// After recovery: the bucket alone restores every acknowledged event.
	tip := uint64(len(r.acked))
	final := r.truth()
	row.Unrecoverable = final.unrecoverable(tip)
	if view := r.restoreFrom(r.clean); view.err != nil {
		key, named := namesOneOf(view.err, final.corrupt)
		row.Restore = "refused: " + fltErrWhat(view.err, final.corrupt)
		if !c.lands || !named || !fltCorruptErr(view.err) {
			t.Errorf("restore after recovery: %v", view.err)
		} else {
			t.Logf("restore after recovery refuses %s: %v; %d acknowledged events no verifiable object holds", key, view.err, row.Unrecoverable)
		}
	} else {
		v := r.judge(view, tip)
		row.addVerdict(v)
		row.Restore = fmt.Sprintf("ok base %d", view.base)
		if !v.clean() {
			t.Errorf("restore after recovery: %v", v)
		}
		if r.hasConsumer && view.consumers["c"] != r.wantConsumer {
			t.Errorf("restored consumer c at %d, the engine's at %d", view.consumers["c"], r.wantConsumer)
		}
		if c.scenario == "reclaim" {
			r.checkNoOrphans(final.mark)
		}
	}
	if row.Unrecoverable > 0 && !c.lands {
		t.Errorf("%d acknowledged events are in no verifiable bucket object after recovery", row.Unrecoverable)
	}
	if len(detected) == 0 {
		detected = append(detected, "—")
	}
	row.Detected = strings.Join(detected, "; ")
	row.Verdict = c.why
	if t.Failed() {
		row.Verdict = "FAILED: " + row.Verdict
	}
	row.Seconds = time.Since(start).Seconds()
	return row
}

func (row *faultRow) addVerdict(v verdict) {
	row.Events += v.checked
	row.Lost += v.lost
	row.Dups += v.dups
	row.Wrong += v.wrong + v.gaps
}

// checkNoOrphans fails when objects the watermark covers are still in the
// bucket after recovery: failed deletes must be retried.
func (r *faultRig) checkNoOrphans(m watermark.Mark) {
	r.t.Helper()
	for _, info := range objects(r.t, r.clean, 0, blobtier.KindSegment) {
		if info.Parsed.Segment <= m.Segment {
			r.t.Errorf("orphan segment object %s at or below the watermark (segment %d) after recovery", info.Key, m.Segment)
		}
	}
	for _, info := range objects(r.t, r.clean, 0, blobtier.KindTail) {
		if info.Parsed.LastSeq <= m.Seq {
			r.t.Errorf("orphan tail object %s at or below the watermark (sequence %d) after recovery", info.Key, m.Seq)
		}
	}
}

// checkNoSuperseded fails when a tail object that the bucket's durable
// segments cover is still there after recovery: failed or missed tail
// deletes must be retried.
func (r *faultRig) checkNoSuperseded() {
	r.t.Helper()
	snap, err := r.l.Store().Snapshot()
	if err != nil {
		r.t.Fatal(err)
	}
	inBucket := map[uint64]bool{}
	for _, info := range objects(r.t, r.clean, 0, blobtier.KindSegment) {
		inBucket[info.Parsed.Segment] = true
	}
	through := snap.ReclaimedSeq
	for _, seg := range snap.Segments {
		if !seg.Sealed || !inBucket[seg.ID] {
			break
		}
		if seg.Events > 0 {
			through = seg.LastSeq
		}
	}
	for _, info := range objects(r.t, r.clean, 0, blobtier.KindTail) {
		if info.Parsed.LastSeq <= through {
			r.t.Errorf("superseded tail object %s (durable segments cover through %d) is still in the bucket after recovery", info.Key, through)
		}
	}
}

// fltKeyKind names an object key by its kind, for the table.
func fltKeyKind(key string) string {
	switch {
	case strings.HasPrefix(key, "noetl.ehdb.seg."):
		return "segment key"
	case strings.HasPrefix(key, "noetl.ehdb.tail."):
		return "tail key"
	case strings.HasPrefix(key, "noetl.ehdb.rw."):
		return "watermark key"
	case strings.HasPrefix(key, "noetl.ehdb.cur."):
		return "cursor key"
	}
	return key
}

// fltErrWhat summarises an error for the table: the kind of object it
// names, and whether it is a verification failure or a divergence.
func fltErrWhat(err error, corrupt []string) string {
	what := "error"
	switch {
	case fltCorruptErr(err):
		what = "corrupt"
	case errors.Is(err, bucketlog.ErrDiverged):
		what = "diverged"
	}
	if key, ok := namesOneOf(err, corrupt); ok {
		return what + " " + fltKeyKind(key)
	}
	return what
}
