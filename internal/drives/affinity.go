package drives

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"

	"github.com/bucketlog/bucketlog/affinity"
	"github.com/bucketlog/bucketlog/internal/routed"
	"github.com/bucketlog/bucketlog/localseg"
)

// MaxAffinityShards bounds the affinity drive's pool: the drive opens one
// replica per shard in one process and compares the whole tree after every
// refusal, so it is meant for small pools.
const MaxAffinityShards = 64

// affinityExecutionBase is the first id the drive tries: a snowflake-like
// decimal id (one of the docs/FORMAT.md §5 vectors), so the drive routes real-looking
// ids through the int64 path of ShardFor.
const affinityExecutionBase = 320816801799737344

// AffinityReport is the outcome of the single-writer drive, shaped as the
// seed's durable-eventlog-affinity output.
type AffinityReport struct {
	SingleWriterHolds bool            `json:"single_writer_holds"`
	Report            AffinityDetails `json:"report"`
}

// AffinityDetails are the observations of the single-writer drive.
type AffinityDetails struct {
	ShardCount int `json:"shard_count"`
	// Executions is the size of the deterministic execution set (two per
	// shard).
	Executions int `json:"executions"`
	// OwnerAppends counts appends served by owners (one per execution).
	OwnerAppends int `json:"owner_appends"`
	// NonownerRefusals counts single-event appends refused by non-owners
	// (executions × (shard_count − 1)). The refused batches, pulls and acks
	// the drive also tries are checked but not counted here.
	NonownerRefusals int `json:"nonowner_refusals"`
	// OwnerWritesOK: every owner served its executions with gapless
	// sequences and read them back.
	OwnerWritesOK bool `json:"owner_writes_ok"`
	// NonownerRefusedOK: every non-owner write was refused naming the right
	// owner and left every file under the root byte-identical.
	NonownerRefusedOK bool `json:"nonowner_refused_ok"`
	// SingleWriterInvariant: every execution has exactly one owner and
	// every shard holds only its own executions, each exactly once.
	SingleWriterInvariant bool `json:"single_writer_invariant"`
	// ColdloadReadOK: every non-owner read was a cold load returning what
	// the owner returns, and the cold loads changed nothing on disk.
	ColdloadReadOK bool `json:"coldload_read_ok"`
	// CrashRecoveryOK: after a restart that lost every checkpoint, each
	// owner recovered its shard by replay, continued its sequence, and the
	// non-owners cold-load the continuation.
	CrashRecoveryOK bool `json:"crash_recovery_ok"`
	// Divergence describes the first problem found, or is null.
	Divergence *string `json:"divergence"`
}

// Holds reports whether every check passed and nothing diverged.
func (r AffinityReport) Holds() bool {
	d := r.Report
	return d.OwnerWritesOK && d.NonownerRefusedOK && d.SingleWriterInvariant && d.ColdloadReadOK && d.CrashRecoveryOK && d.Divergence == nil
}

// replica is what the drive needs from one member of the pool; *routed.Log
// provides it. Tests substitute a broken one (RED controls).
type replica interface {
	Append(localseg.Event) (localseg.AppendResult, error)
	AppendBatch([]localseg.Event) (first, last uint64, err error)
	Read(executionID string, after uint64, limit int) (routed.ReadResult, error)
	ScanShard(shard int, after uint64, limit int) (routed.ReadResult, error)
	Pull(shard int, consumer string, limit int) (localseg.PullResult, error)
	Ack(shard int, consumer string, seq uint64) (uint64, error)
	Close() error
}

// affinityHooks let tests break the drive on purpose (RED controls).
// Production runs use the zero value.
type affinityHooks struct {
	// wrap replaces each replica.
	wrap func(*routed.Log) replica
	// beforeRecovery runs on the root after the pool is closed and before
	// it reopens.
	beforeRecovery func(root string) error
}

// Affinity is the single-writer drive (CHECKLIST §2.7): on a fresh root it
// opens a pool of shardCount replicas (replica i owns shard i), routes a
// deterministic execution set (two executions per shard) through every
// replica, and checks that owners write, non-owners are refused with nothing
// left behind, each execution has exactly one owner and each shard holds only
// its own data, non-owner reads are cold loads that see what the owner sees
// and change nothing, and that after a restart that loses every checkpoint
// (so recovery is a replay of the segments) each owner continues its shard.
//
// It refuses (ErrUsage) fewer than 2 or more than MaxAffinityShards shards,
// an empty root and a root that already holds anything. Problems are
// reported in the report (Holds false); an error means the drive could not
// run.
func Affinity(root string, shardCount int) (AffinityReport, error) {
	return affinityDrive(root, shardCount, affinityHooks{})
}

// driveExecutions returns perShard decimal execution ids owned by each
// shard, in a deterministic order (shard by shard).
func driveExecutions(n, perShard int) []string {
	byShard := make([][]string, n)
	filled := 0
	for i := int64(0); filled < n; i++ {
		id := strconv.FormatInt(affinityExecutionBase+i, 10)
		s := affinity.ShardFor(id, n)
		if len(byShard[s]) < perShard {
			byShard[s] = append(byShard[s], id)
			if len(byShard[s]) == perShard {
				filled++
			}
		}
	}
	var out []string
	for _, ids := range byShard {
		out = append(out, ids...)
	}
	return out
}

func driveEvent(id string, round int) localseg.Event {
	return localseg.Event{
		ExecutionID:   id,
		TransactionID: fmt.Sprintf("txn-%s-%d", id, round),
		Payload:       fmt.Sprintf(`{"execution":"%s","round":%d,"note":"<owner> & \"writer\" é"}`, id, round),
	}
}

// treeDigest is every file under root with its size and SHA-256, so a
// drive can prove that an operation changed nothing.
func treeDigest(root string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[rel+"/"] = "dir"
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[rel] = fmt.Sprintf("%d:%x", len(b), sha256.Sum256(b))
		return nil
	})
	return out, err
}

type affinityRun struct {
	root  string
	n     int
	execs []string
	hooks affinityHooks
	pool  []replica
	d     *AffinityDetails
	c     checks
	// pages are the owners' resident pages per execution before the
	// restart.
	pages map[string]localseg.Page
}

func affinityDrive(root string, shardCount int, hooks affinityHooks) (AffinityReport, error) {
	if shardCount < 2 {
		return AffinityReport{}, usagef("the affinity drive needs at least 2 shards, got %d (one shard has no non-owner to refuse)", shardCount)
	}
	if shardCount > MaxAffinityShards {
		return AffinityReport{}, usagef("the affinity drive runs at most %d shards, got %d", MaxAffinityShards, shardCount)
	}
	if err := prepareRoot(root); err != nil {
		return AffinityReport{}, err
	}
	execs := driveExecutions(shardCount, 2)
	var rep AffinityReport
	r := &affinityRun{root: root, n: shardCount, execs: execs, hooks: hooks, d: &rep.Report, pages: map[string]localseg.Page{}}
	r.d.ShardCount, r.d.Executions = shardCount, len(execs)
	if err := r.openPool(); err != nil {
		return AffinityReport{}, err
	}
	r.writes()
	r.invariant()
	r.coldLoads()
	if err := r.closePool(); err != nil {
		r.c.fail("close the pool: %v", err)
	}
	r.recovery()
	rep.Report.Divergence = r.c.first
	rep.SingleWriterHolds = rep.Holds()
	return rep, nil
}

func (r *affinityRun) openPool() error {
	r.pool = make([]replica, r.n)
	for i := range r.n {
		l, err := routed.Open(r.root, affinity.Ownership{Index: i, Count: r.n}, routed.Options{})
		if err != nil {
			for _, p := range r.pool[:i] {
				p.Close()
			}
			return fmt.Errorf("affinity drive: open replica %d: %w", i, err)
		}
		r.pool[i] = l
		if r.hooks.wrap != nil {
			r.pool[i] = r.hooks.wrap(l)
		}
	}
	return nil
}

func (r *affinityRun) closePool() error {
	var errs []error
	for _, p := range r.pool {
		errs = append(errs, p.Close())
	}
	r.pool = nil
	return errors.Join(errs...)
}

// unchanged compares the tree with before and reports a change.
func (r *affinityRun) unchanged(before map[string]string, what string) bool {
	after, err := treeDigest(r.root)
	if err != nil {
		return r.c.fail("digest the root after %s: %v", what, err)
	}
	if !reflect.DeepEqual(before, after) {
		return r.c.fail("%s changed files under the root", what)
	}
	return true
}

// writes routes one event per execution through every replica.
func (r *affinityRun) writes() {
	r.d.OwnerWritesOK, r.d.NonownerRefusedOK = true, true
	next := make([]uint64, r.n) // the next sequence per shard
	for s := range next {
		next[s] = 1
	}
	for _, id := range r.execs {
		owner := affinity.ShardFor(id, r.n)
		ev := driveEvent(id, 1)
		for i, p := range r.pool {
			if i == owner {
				continue
			}
			before, err := treeDigest(r.root)
			if err != nil {
				r.d.NonownerRefusedOK = r.c.fail("digest the root: %v", err)
				continue
			}
			_, err = p.Append(ev)
			var noe *affinity.NotOwnerError
			if !errors.As(err, &noe) {
				r.d.NonownerRefusedOK = r.c.fail("replica %d appended execution %s owned by shard %d (err %v)", i, id, owner, err)
			} else {
				r.d.NonownerRefusals++
				if noe.Owner != owner {
					r.d.NonownerRefusedOK = r.c.fail("replica %d refused execution %s naming shard %d, the owner is %d", i, id, noe.Owner, owner)
				}
			}
			if !r.unchanged(before, fmt.Sprintf("a refused append of %s on replica %d", id, i)) {
				r.d.NonownerRefusedOK = false
			}
		}
		res, err := r.pool[owner].Append(ev)
		switch {
		case err != nil:
			r.d.OwnerWritesOK = r.c.fail("owner %d could not append execution %s: %v", owner, id, err)
		case res.Seq != next[owner]:
			r.d.OwnerWritesOK = r.c.fail("owner %d gave execution %s sequence %d, want %d (a refusal consumed a sequence?)", owner, id, res.Seq, next[owner])
		default:
			r.d.OwnerAppends++
			next[owner]++
		}
	}

	// A batch with one foreign event is refused whole, and non-owner consumer
	// operations are refused, all with nothing left behind.
	before, err := treeDigest(r.root)
	if err != nil {
		r.d.NonownerRefusedOK = r.c.fail("digest the root: %v", err)
		return
	}
	for i, p := range r.pool {
		own := r.execs[2*i] // shard i's first execution
		foreign := r.execs[2*((i+1)%r.n)]
		if _, _, err := p.AppendBatch([]localseg.Event{driveEvent(own, 2), driveEvent(foreign, 2)}); !errors.Is(err, affinity.ErrNotOwner) {
			r.d.NonownerRefusedOK = r.c.fail("replica %d accepted a batch holding execution %s of shard %d (err %v)", i, foreign, (i+1)%r.n, err)
		}
		other := (i + 1) % r.n
		if _, err := p.Pull(other, "drive-consumer", 10); !errors.Is(err, affinity.ErrNotOwner) {
			r.d.NonownerRefusedOK = r.c.fail("replica %d pulled from shard %d (err %v)", i, other, err)
		}
		if _, err := p.Ack(other, "drive-consumer", 1); !errors.Is(err, affinity.ErrNotOwner) {
			r.d.NonownerRefusedOK = r.c.fail("replica %d acked on shard %d (err %v)", i, other, err)
		}
	}
	if !r.unchanged(before, "refused batches, pulls and acks") {
		r.d.NonownerRefusedOK = false
	}

	// Each owner reads its executions back from its resident store.
	for _, id := range r.execs {
		owner := affinity.ShardFor(id, r.n)
		res, err := r.pool[owner].Read(id, 0, 100)
		want := driveEvent(id, 1)
		switch {
		case err != nil:
			r.d.OwnerWritesOK = r.c.fail("owner %d read of %s: %v", owner, id, err)
		case res.ServedBy != affinity.ServedByOwnerResident:
			r.d.OwnerWritesOK = r.c.fail("owner %d read of %s was served by %s", owner, id, res.ServedBy)
		case len(res.Page.Records) != 1 || res.Page.Records[0].Payload != want.Payload || res.Page.Records[0].TransactionID != want.TransactionID:
			r.d.OwnerWritesOK = r.c.fail("owner %d read of %s returned %+v", owner, id, res.Page.Records)
		default:
			r.pages[id] = res.Page
		}
	}
}

// invariant checks that each execution has exactly one owner and each shard
// holds only its own executions, once each.
func (r *affinityRun) invariant() {
	r.d.SingleWriterInvariant = true
	for _, id := range r.execs {
		owners := 0
		for i := range r.n {
			if (affinity.Ownership{Index: i, Count: r.n}).Owns(id) {
				owners++
			}
		}
		if owners != 1 {
			r.d.SingleWriterInvariant = r.c.fail("execution %s has %d owners", id, owners)
		}
	}
	seen := map[string]int{}
	for s, p := range r.pool {
		res, err := p.ScanShard(s, 0, 10*len(r.execs)+10)
		if err != nil {
			r.d.SingleWriterInvariant = r.c.fail("scan shard %d: %v", s, err)
			continue
		}
		for j, rec := range res.Page.Records {
			if rec.Seq != uint64(j+1) {
				r.d.SingleWriterInvariant = r.c.fail("shard %d position %d holds sequence %d", s, j, rec.Seq)
			}
			if o := affinity.ShardFor(rec.ExecutionID, r.n); o != s {
				r.d.SingleWriterInvariant = r.c.fail("shard %d holds sequence %d of execution %s, which belongs to shard %d", s, rec.Seq, rec.ExecutionID, o)
			}
			seen[rec.ExecutionID]++
		}
	}
	for _, id := range r.execs {
		if seen[id] != 1 {
			r.d.SingleWriterInvariant = r.c.fail("execution %s is stored %d times across the shards, want once", id, seen[id])
		}
	}
	if len(seen) != len(r.execs) {
		r.d.SingleWriterInvariant = r.c.fail("the shards hold %d executions, the drive wrote %d", len(seen), len(r.execs))
	}
}

// coldLoads reads every execution from every non-owner.
func (r *affinityRun) coldLoads() {
	r.d.ColdloadReadOK = true
	before, err := treeDigest(r.root)
	if err != nil {
		r.d.ColdloadReadOK = r.c.fail("digest the root: %v", err)
		return
	}
	for _, id := range r.execs {
		owner := affinity.ShardFor(id, r.n)
		for i, p := range r.pool {
			if i == owner {
				continue
			}
			res, err := p.Read(id, 0, 100)
			switch {
			case err != nil:
				r.d.ColdloadReadOK = r.c.fail("replica %d cold read of %s: %v", i, id, err)
			case res.ServedBy != affinity.ServedByNonOwnerColdLoad || res.Shard != owner:
				r.d.ColdloadReadOK = r.c.fail("replica %d read of %s was served by %s from shard %d", i, id, res.ServedBy, res.Shard)
			case !samePage(res.Page, r.pages[id]):
				r.d.ColdloadReadOK = r.c.fail("replica %d cold read of %s differs from the owner's: %+v vs %+v", i, id, res.Page, r.pages[id])
			}
		}
	}
	if !r.unchanged(before, "non-owner cold loads") {
		r.d.ColdloadReadOK = false
	}
}

// recovery reopens the pool after losing every checkpoint and checks that
// each owner continues its shard.
func (r *affinityRun) recovery() {
	r.d.CrashRecoveryOK = true
	// A crash can leave checkpoint.json stale; removing it makes the reopen
	// a full replay of the segments, which is what must be proven.
	for s := range r.n {
		err := localseg.RemoveCheckpoint(localseg.ShardDir(r.root, s))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.d.CrashRecoveryOK = r.c.fail("remove the checkpoint of shard %d: %v", s, err)
			return
		}
	}
	if r.hooks.beforeRecovery != nil {
		if err := r.hooks.beforeRecovery(r.root); err != nil {
			r.d.CrashRecoveryOK = r.c.fail("hook: %v", err)
			return
		}
	}
	if err := r.openPool(); err != nil {
		r.d.CrashRecoveryOK = r.c.fail("reopen after the restart: %v", err)
		return
	}
	defer func() {
		if err := r.closePool(); err != nil {
			r.d.CrashRecoveryOK = r.c.fail("close after recovery: %v", err)
		}
	}()
	for _, id := range r.execs {
		owner := affinity.ShardFor(id, r.n)
		res, err := r.pool[owner].Read(id, 0, 100)
		if err != nil {
			r.d.CrashRecoveryOK = r.c.fail("owner %d read of %s after the restart: %v", owner, id, err)
			continue
		}
		if !samePage(res.Page, r.pages[id]) {
			r.d.CrashRecoveryOK = r.c.fail("owner %d read of %s after the restart: %+v, before: %+v", owner, id, res.Page, r.pages[id])
		}
	}
	// Each owner continues its sequence, and a non-owner sees the new event.
	for s, p := range r.pool {
		id := r.execs[2*s]
		res, err := p.Append(driveEvent(id, 3))
		want := uint64(2) // two executions, one event each, per shard
		if err != nil || res.Seq != want+1 || res.Created {
			r.d.CrashRecoveryOK = r.c.fail("owner %d append after the restart = %+v, %v; want sequence %d", s, res, err, want+1)
			continue
		}
		other := r.pool[(s+1)%r.n]
		cold, err := other.Read(id, 0, 100)
		if err != nil || len(cold.Page.Records) != 2 || cold.Page.Records[1].Seq != want+1 {
			r.d.CrashRecoveryOK = r.c.fail("non-owner read of %s after the restart = %+v, %v", id, cold.Page, err)
		}
	}
}

// samePage compares two pages, treating nil and empty record slices alike.
func samePage(a, b localseg.Page) bool {
	if len(a.Records) == 0 && len(b.Records) == 0 {
		a.Records, b.Records = nil, nil
	}
	return reflect.DeepEqual(a, b)
}
