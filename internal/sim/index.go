package sim

// Index objects (docs/FORMAT.md §6.10) in the simulation. The owner puts
// one beside every segment it makes durable (every fault rule on "*" hits
// those puts too); a lazily restored store reads them when it resolves its
// remote segments (every scan of one: restoreLazy), and a per-execution read
// of every execution, which builds the whole index from them, must return
// exactly the scan's events of that execution (checkExecutions). The
// damage-index op damages one at rest or forges one (another segment's
// index object, intact, put under its key): both must only cost a fetch of
// the segment, never a wrong or failed read, so neither excuses anything.
// TestSimIndexREDControl turns the readers' trust rule off: the forged
// objects must then fail the oracle.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gocloud.dev/blob"

	"github.com/bucketlog/bucketlog"
	"github.com/bucketlog/bucketlog/blobtier"
	"github.com/bucketlog/bucketlog/localseg"
)

// errExecRead marks a per-execution read that disagrees with the scan of
// the same store: a violation, never excused.
var errExecRead = errors.New("sim: a per-execution read disagrees with the scan")

// simExecs are the executions newEvent draws from.
var simExecs = []string{"ex-0", "ex-1", "ex-2", "ex-3", "ex-4"}

// checkExecutions reads every execution of l through per-execution reads
// and compares them with got, the scan of l.
func checkExecutions(l *bucketlog.Log, got restored) error {
	for _, exec := range simExecs {
		var want []localseg.Record
		for _, rec := range got.records {
			if rec.ExecutionID == exec {
				want = append(want, rec)
			}
		}
		var have []localseg.Record
		after := uint64(0)
		for {
			res, err := l.ReadExecution(simCtx(), exec, after, 500)
			if err != nil {
				return fmt.Errorf("%w: execution %s after %d: %w", errExecRead, exec, after, err)
			}
			if len(res.Page.Records) == 0 {
				break
			}
			have = append(have, res.Page.Records...)
			after = res.Page.Records[len(res.Page.Records)-1].Seq
		}
		if len(have) != len(want) {
			return fmt.Errorf("%w: execution %s: %d records, the scan has %d", errExecRead, exec, len(have), len(want))
		}
		for i := range have {
			if have[i] != want[i] {
				return fmt.Errorf("%w: execution %s: record %d is %+v, the scan has %+v", errExecRead, exec, i, have[i], want[i])
			}
		}
	}
	return nil
}

// opDamageIndex damages an index object at rest (a flipped byte or a
// truncation: it fails verification), or forges one: another segment's
// index object, intact, put under its key.
func (r *run) opDamageIndex(ctx context.Context) *violation {
	keys := r.w.raw.Keys(blobtier.ListPrefix(0, blobtier.KindIndex))
	if len(keys) == 0 {
		return nil
	}
	key := keys[r.rng.IntN(len(keys))]
	data, ok := r.w.raw.Raw(key)
	if !ok || len(data) == 0 {
		return nil
	}
	switch r.rng.IntN(3) {
	case 0:
		data[r.rng.IntN(len(data))] ^= 0x10
		r.w.raw.SetRaw(key, data)
		r.stats.Faults["at-rest:index"]++
		r.logf("damage index object %s at rest", key)
	case 1:
		r.w.raw.SetRaw(key, data[:len(data)/2])
		r.stats.Faults["at-rest:index"]++
		r.logf("truncate index object %s at rest", key)
	default:
		donor := keys[r.rng.IntN(len(keys))]
		body, ok := r.w.raw.Raw(donor)
		if !ok || donor == key {
			return nil
		}
		direct := blobtier.New(blob.NewBucket(r.w.raw), blobtier.Options{Timeout: time.Minute})
		if err := direct.Delete(ctx, key); err != nil {
			return nil
		}
		if err := direct.PutIfAbsent(ctx, key, body, 0); err != nil {
			r.logf("forge index object %s -> %s", key, errClass(err))
			return nil
		}
		r.stats.Faults["forged-index"]++
		r.logf("forge index object %s with %s's body", key, donor)
	}
	return nil
}

// noteIndexReads counts, after a lazily restored store was read, how its
// remote segments were located (coverage).
func (r *run) noteIndexReads() {
	st := r.w.lastIndex
	r.w.lastIndex = localseg.RemoteStats{}
	if st.IndexUsed > 0 {
		r.stats.Steps["restore-lazy:index-objects-used"] += int(st.IndexUsed)
	}
	if st.IndexRefused > 0 {
		r.stats.Steps["restore-lazy:index-objects-refused"] += int(st.IndexRefused)
	}
}
